package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/internal/testkit/policydir"
	"aimon.dev/gw/policy"
)

func TestMain(m *testing.M) { gobuild.Main(m) }

// cli runs the gateway binary, built once, and returns its standard
// output and exit code.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(gobuild.Binary(t, "aimon.dev/gw/cmd/aimon-gw"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// writePolicy writes files into a new policy directory.
func writePolicy(t *testing.T, files map[string]string) string { return policydir.Write(t, files) }

const header = "package policy\n\nimport \"aimon.dev/gw/schema\"\n\n"

// vetPolicies are sound, warned and broken policies for vet.
func vetPolicies(t *testing.T) map[string]string {
	return map[string]string{
		"team":    "../examples/policies/team",
		"yaml":    "../examples/policies/yaml",
		"default": "../internal/core/defaultpolicy",
		"warned": writePolicy(t, map[string]string{"policy.cue": header + `tools: {Read: schema.#Read, Bash: schema.#Bash & {input: timeout?: <="120000"}}
agent: "allowed-tools": ["Read(./**)", "Read(/a/[)", "Bash(git:*)"]
subagents: reviewer: "allowed-tools": []
`}),
		"broken": writePolicy(t, map[string]string{"policy.cue": header + `tools: {Read: schema.#Read, Deploy: description: "x"}
agent: "allowed-tools": ["Read"]
`}),
		"syntax": writePolicy(t, map[string]string{"policy.cue": header + "tools: {\n"}),
	}
}

// TestR7VetAsTheCLI: Load's Errors and Vet's Diagnostics are, problem for
// problem, at the place and with the code, sentence and severity that
// aimon-gw vet --format json prints for the same directory, and a policy
// has errors for one exactly when vet exits 1 without --strict.
func TestR7VetAsTheCLI(t *testing.T) {
	ctx := context.Background()
	for name, dir := range vetPolicies(t) {
		t.Run(name, func(t *testing.T) {
			out, code := cli(t, "vet", "--format", "json", dir)
			var want []struct {
				File     string `json:"file"`
				Line     int    `json:"line"`
				Column   int    `json:"column"`
				Code     string `json:"code"`
				Message  string `json:"message"`
				Severity string `json:"severity"`
			}
			if err := json.Unmarshal([]byte(out), &want); err != nil {
				t.Fatalf("vet printed %q (exit %d): %v", out, code, err)
			}
			var got []policy.Diagnostic
			pol, err := policy.Load(ctx, dir, policy.WithWorkdir(""))
			var errs policy.Errors
			switch {
			case errors.As(err, &errs):
				got = errs
			case err != nil:
				t.Fatal(err)
			default:
				if got, err = pol.Vet(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("the façade found %d problems, vet %d:\n%v\n%s", len(got), len(want), got, out)
			}
			hasError := false
			for i, d := range got {
				w := want[i]
				sev := map[bool]string{true: "warning", false: "error"}[d.Warning]
				hasError = hasError || !d.Warning
				if d.Pos.File != w.File || d.Pos.Line != w.Line || d.Pos.Col != w.Column || d.Code != w.Code || d.Message != w.Message || sev != w.Severity {
					t.Errorf("problem %d: the façade has %+v, vet %+v", i, d, w)
				}
			}
			if (code == 1) != hasError || (code != 0 && code != 1) {
				t.Errorf("vet exited %d, the façade found an error: %v", code, hasError)
			}
			if name == "warned" && len(got) < 3 || name == "team" && len(got) != 0 {
				t.Errorf("%s: %d problems: %v", name, len(got), got)
			}
		})
	}
}

// TestR7TestAsTheCLI: Test passes and fails the same cases, at the same
// places, as aimon-gw test -v prints them, for the example policy and for
// a policy with a failing case and a "./" pattern (resolved in the
// policy's directory whatever the load's working directory was).
func TestR7TestAsTheCLI(t *testing.T) {
	failing := writePolicy(t, map[string]string{"policy.cue": header + `tools: {Read: schema.#Read, Echo: schema.#Echo}
agent: "allowed-tools": ["Read(./**)", "Echo"]
tests: {
	"reads its own files": {tool: "Read", input: file_path: "policy.cue", allowed: true}
	"echo is refused": {tool: "Echo", input: text: "hi", allowed: false}
	"reads nothing else": {tool: "Read", input: file_path: "/etc/passwd", allowed: false, rule: "P4"}
}
`})
	// The first case reads a relative path, from the policy's directory.
	abs := filepath.Join(failing, "policy.cue")
	data, _ := os.ReadFile(abs)
	os.WriteFile(abs, bytes.Replace(data, []byte(`file_path: "policy.cue"`), []byte(`file_path: "`+abs+`"`), 1), 0o644)
	team, _ := filepath.Abs("../examples/policies/team")
	for name, dir := range map[string]string{"team": team, "failing": failing} {
		t.Run(name, func(t *testing.T) {
			out, code := cli(t, "test", "-v", dir)
			for _, wd := range []policy.Option{policy.WithWorkdir(dir), policy.WithWorkdir("/")} {
				pol, err := policy.Load(context.Background(), dir, wd)
				if err != nil {
					t.Fatal(err)
				}
				rs, err := pol.Test(context.Background(), policy.TestOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var lines []string
				failed := 0
				for _, r := range rs {
					verdict := "ok"
					if r.Failure != "" {
						verdict, failed = r.Failure, failed+1
					}
					lines = append(lines, r.Pos.String()+": test \""+r.Name+"\": "+verdict)
				}
				printed := strings.Split(strings.TrimSpace(out), "\n")
				if got, want := strings.Join(lines, "\n"), strings.Join(printed[:len(printed)-1], "\n"); got != want {
					t.Errorf("the façade's cases:\n%s\naimon-gw test -v:\n%s", got, want)
				}
				if (failed > 0) != (code == 1) {
					t.Errorf("%d cases failed, and aimon-gw test exited %d", failed, code)
				}
			}
			if name == "failing" && code != 1 {
				t.Errorf("aimon-gw test exited %d on a failing case", code)
			}
		})
	}
}

// TestLoadRefusesBadInput: a directory that is not one, a working
// directory that is not one, a policy of an fs.FS asked to run its tests,
// a principal that cannot be read, and a context already done are each a
// sentence that says what to give instead; none panics.
func TestLoadRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		note string
		err  func() error
		want string
	}{
		{"no such directory", func() error { _, err := policy.Load(ctx, "/no/such/policy"); return err }, "the policy directory does not exist or cannot be read"},
		{"a file", func() error { _, err := policy.Load(ctx, file); return err }, "the policy path is not a directory"},
		{"a workdir that is a file", func() error {
			_, err := policy.Load(ctx, "../examples/policies/team", policy.WithWorkdir(file))
			return err
		}, "give WithWorkdir an existing directory"},
		{"tests of an fs.FS", func() error {
			pol, err := policy.LoadFS(ctx, team)
			if err != nil {
				return err
			}
			_, err = pol.Test(ctx, policy.TestOptions{})
			return err
		}, "load it with policy.Load(ctx, dir)"},
		{"tests of the default", func() error {
			pol, err := policy.Load(ctx, "")
			if err != nil {
				return err
			}
			_, err = pol.Test(ctx, policy.TestOptions{})
			return err
		}, "not loaded from a directory"},
		{"a principal of bad JSON", func() error {
			pol, err := policy.Load(ctx, "../examples/policies/team")
			if err != nil {
				return err
			}
			_, err = pol.Test(ctx, policy.TestOptions{Principal: `{"sub":`})
			return err
		}, "the principal"},
		{"a run that matches nothing runs nothing", func() error {
			pol, err := policy.Load(ctx, "../examples/policies/team")
			if err != nil {
				return err
			}
			rs, err := pol.Test(ctx, policy.TestOptions{Run: regexp.MustCompile("^no such case$")})
			if err == nil && len(rs) != 0 {
				return errors.New("ran cases")
			}
			return errors.New("ran none")
		}, "ran none"},
	} {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a sentence with %q", tc.note, err, tc.want)
		}
	}
}
