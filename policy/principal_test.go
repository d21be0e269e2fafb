package policy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"aimon.dev/gw/internal/testkit/policydir"
	"aimon.dev/gw/policy"
)

// A policy whose principals map an identity provider's callers to chains.
var mapped = fstest.MapFS{"policy.cue": {Data: []byte(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Echo: schema.#Echo}
agent: "allowed-tools": ["Read", "Echo"]
subagents: reviewer: "allowed-tools": ["Read(/src/**)"]
principals: {
	alice: {subject: "alice", surface: ["agent", "subagent:reviewer"]}
	ops: {group: "ops", surface: ["agent"]}
}
`)}}

// A caller named by its subject, or by its token's claims, runs on the
// chain the policy's principals map it to.
func ExamplePolicy_PrincipalSurface() {
	pol, err := policy.LoadFS(context.Background(), mapped, policy.WithWorkdir("/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, spec := range []string{"alice", `{"sub":"carol","groups":["ops"]}`, "mallory"} {
		pr, err := policy.ParsePrincipal(spec)
		if err != nil {
			fmt.Println(err)
			continue
		}
		chain, err := pol.PrincipalSurface(pr)
		if err != nil {
			fmt.Println(pr.Subject, "is refused")
			continue
		}
		fmt.Println(pr.Subject, chain)
	}
	// Output:
	// alice [agent subagent:reviewer]
	// carol [agent]
	// mallory is refused
}

// A chain may only go deeper than the gateway's own (rule R5).
func ExampleExtends() {
	gw := []string{"subagent:reviewer"} // rooted: agent, subagent:reviewer
	fmt.Println(policy.Extends(gw, []string{"agent", "subagent:reviewer", "skill:lint"}))
	fmt.Println(policy.Extends(gw, []string{"agent"}))
	fmt.Println(policy.Rooted(gw))
	// Output:
	// true
	// false
	// [agent subagent:reviewer]
}

// Claims that are not JSON, an unknown claim and an empty spec are each
// refused with a sentence that says how to write one (rule R5: a caller
// the gateway cannot name is not mapped to any chain).
func TestR5ParsePrincipalBadClaims(t *testing.T) {
	for spec, want := range map[string]string{
		`{"sub":`:                `is not claims as JSON (unexpected EOF); write {"sub":"alice"`,
		`{"sub":"a","role":"x"}`: "is not claims as JSON",
		"  ":                     "the principal is empty; give a subject",
	} {
		if _, err := policy.ParsePrincipal(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePrincipal(%q) = %v, want an error saying %q", spec, err, want)
		}
	}
	pr, err := policy.ParsePrincipal(`{"sub":"alice","groups":["docs"],"client_id":"cli","scopes":["read"]}`)
	if err != nil || pr.Subject != "alice" || pr.ClientID != "cli" || len(pr.Groups) != 1 || len(pr.Scopes) != 1 {
		t.Fatalf("ParsePrincipal of full claims = %+v, %v", pr, err)
	}
	if got := pr.String(); !strings.Contains(got, `subject "alice"`) || !strings.Contains(got, `client "cli"`) {
		t.Errorf("String() = %q, want the caller named by its claims", got)
	}
}

// A caller no principal matches, and one whose principals' chains
// diverge, are refused: no chain, and a sentence (rule R5).
func TestR5PrincipalSurfaceRefusesTheUnmapped(t *testing.T) {
	pol, err := policy.LoadFS(context.Background(), mapped, policy.WithWorkdir("/"))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := pol.PrincipalSurface(policy.Principal{Subject: "mallory"})
	if err == nil || chain != nil || !strings.Contains(err.Error(), "no entry of the policy's principals matches it") {
		t.Errorf("mallory: %v, %v; want refused", chain, err)
	}
	// alice in the ops group: reviewer's chain extends the agent's, so
	// the deepest is hers.
	if chain, err := pol.PrincipalSurface(policy.Principal{Subject: "alice", Groups: []string{"ops"}}); err != nil || len(chain) != 2 {
		t.Errorf("alice of ops: %v, %v; want the reviewer's chain", chain, err)
	}
}

// VendorSchema writes the shipped schema below a module's cue.mod/pkg; a
// load of a policy with that copy is not refused as stale, and a copy
// that differs is (rule C1: the policy means what this binary's schema
// says). A directory it cannot write is an error.
func TestC1VendorSchema(t *testing.T) {
	dir := policydir.Write(t, map[string]string{"policy.cue": "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\nagent: \"allowed-tools\": [\"Echo\"]\n"})
	if err := policy.VendorSchema(filepath.Join(dir, "cue.mod", "pkg")); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Load(context.Background(), dir, policy.WithWorkdir("")); err != nil {
		t.Fatalf("a policy with the vendored schema does not load: %v", err)
	}
	vendored := filepath.Join(dir, "cue.mod", "pkg", "aimon.dev", "gw", "schema")
	files, _ := filepath.Glob(filepath.Join(vendored, "*.cue"))
	if len(files) == 0 {
		t.Fatalf("nothing was vendored in %s", vendored)
	}
	if err := os.WriteFile(files[0], []byte("package schema\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Load(context.Background(), dir, policy.WithWorkdir("")); err == nil || !strings.Contains(err.Error(), "the vendored schema is stale") {
		t.Errorf("a stale vendored schema loads: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := policy.VendorSchema(file); err == nil {
		t.Errorf("VendorSchema below a file succeeded")
	}
}
