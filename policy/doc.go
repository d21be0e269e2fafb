// Package policy loads an aimon-gw policy, checks it and runs its own
// tests, for a Go program that embeds the gateway: what aimon-gw vet and
// aimon-gw test do, as a library, in the spirit of OPA's rego package.
//
// A policy is a directory of CUE (or YAML, JSON and markdown) files that
// says which tools exist, what their inputs may be, and which surfaces (the
// main agent, its subagents, skills and commands) may call which of them.
// Load compiles it into a Policy: an immutable generation, which a gateway
// (package aimon.dev/gw/gateway) decides calls under and which a hot reload
// replaces whole.
//
//	pol, err := policy.Load(ctx, "policies/team")
//	var errs policy.Errors
//	if errors.As(err, &errs) {
//		for _, d := range errs {
//			fmt.Println(d) // file:line:col: a sentence that says what to do
//		}
//	}
//	problems, err := pol.Vet(ctx)  // warnings: entries that deny, lists that leave no tool
//	results, err := pol.Test(ctx, policy.TestOptions{}) // the policy's tests: field
//
// A load that fails says why in Diagnostics, each at the file, line and
// column of the problem, with the rule it breaks (RULES.md). Load reads a
// directory; LoadFS reads any fs.FS (an embed.FS compiled into the
// program), and Load with the directory "" serves the gateway's embedded
// default policy.
//
// The types of this package are its own: no value here names a type of
// the gateway's internal packages, which stay free to change.
package policy
