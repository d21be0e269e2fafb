package policy_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing/fstest"

	"aimon.dev/gw/policy"
)

// A policy compiled into the program: two tools, and an agent that may
// read below the working directory and echo.
var team = fstest.MapFS{"policy.cue": {Data: []byte(`package policy

import "aimon.dev/gw/schema"

tools: {
	Read: schema.#Read
	Echo: schema.#Echo
}
agent: "allowed-tools": ["Read(./**)", "Echo"]
`)}}

// Load a policy from files of the program's own, and see what it defines.
func ExampleLoadFS() {
	pol, err := policy.LoadFS(context.Background(), team, policy.WithWorkdir("/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pol.Tools(), pol.Surfaces())
	// Output: [Echo Read] [agent]
}

// A policy that does not load says where and why, one Diagnostic a
// problem, each with the rule it breaks.
func ExampleErrors() {
	broken := fstest.MapFS{"policy.cue": {Data: []byte(`package policy

import "aimon.dev/gw/schema"

tools: {
	Read: schema.#Read
	Deploy: description: "Deploys the service."
}
`)}}
	_, err := policy.LoadFS(context.Background(), broken, policy.WithWorkdir("/"))
	var errs policy.Errors
	if errors.As(err, &errs) {
		for _, d := range errs {
			fmt.Printf("%s %s line %d\n", d.Code, d.Pos.File, d.Pos.Line)
		}
	}
	// Output: C1 policy.cue line 7
}

// Vet finds what loads but is not what its authors meant.
func ExamplePolicy_Vet() {
	pol, err := policy.LoadFS(context.Background(), fstest.MapFS{"policy.cue": {Data: []byte(`package policy

import "aimon.dev/gw/schema"

tools: Read: schema.#Read
agent: "allowed-tools": ["Read(./**)"]
subagents: reviewer: "allowed-tools": []
`)}}, policy.WithWorkdir("/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	problems, err := pol.Vet(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range problems {
		fmt.Println(d.Code, d.Warning, d.Pos.Line)
	}
	// Output: P12 true 7
}

// Test runs the policy's own tests: field, each case decided as a served
// call would be, without running a tool.
func ExamplePolicy_Test() {
	pol, err := policy.Load(context.Background(), "../examples/policies/team")
	if err != nil {
		fmt.Println(err)
		return
	}
	results, err := pol.Test(context.Background(), policy.TestOptions{Run: regexp.MustCompile("reviewer")})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Printf("%s: allowed=%v by %s, failure=%q\n", r.Name, r.Verdict.Allowed, r.Verdict.Rule, r.Failure)
	}
	// Output:
	// the reviewer reads in the checkout: allowed=true by P4, failure=""
	// the reviewer writes nothing: allowed=false by P9, failure=""
}
