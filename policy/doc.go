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
// The rest of what aimon-gw does with a policy before it serves one is
// here too. Import turns an agent runtime's permissions (Claude Code's
// settings, Codex's rules, Gemini CLI's policy files) into a policy, as
// aimon-gw import; Pin reads what each upstream server's tools are now,
// beside what the lockfile pins.cue holds (Pins.File writes it), as
// aimon-gw pin; VendorSchema vendors the schema for stock CUE tools, as
// aimon-gw init; ParsePrincipal and PrincipalSurface map an identity
// provider's caller to the chain its calls run on, as --principal.
//
//	im, err := policy.Import("claude-code", []string{".claude/settings.json"}, policy.ImportOptions{})
//	st, err := pol.Pin(ctx, policy.PinOptions{})
//	src, err := st.Now.File() // pins.cue
//
// The types of this package are its own: no value here names a type of
// the gateway's internal packages, which stay free to change.
package policy
