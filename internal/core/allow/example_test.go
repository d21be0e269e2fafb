package allow_test

import (
	"fmt"

	"cuelang.org/go/cue/cuecontext"

	"aimon.dev/gw/internal/core/allow"
)

func Example() {
	ctx := cuecontext.New()
	subjects := map[string]allow.Subject{
		"Bash": {Field: "command", Kind: allow.Command},
		"Read": {Field: "file_path", Kind: allow.Path},
	}
	agent, _ := allow.Compile(ctx, []string{"Bash(git:*)", "Read"}, subjects)
	skill, _ := allow.Compile(ctx, []string{"Bash", "Read(/work/**)"}, subjects)
	e, err := allow.Chain(agent, skill) // the caller first
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{
		{"Bash", map[string]any{"command": "git log -1"}},
		{"Bash", map[string]any{"command": "git log; rm -rf /"}},
		{"Read", map[string]any{"file_path": "src/main.go"}},
		{"Read", map[string]any{"file_path": "../etc/passwd"}},
	} {
		d := e.Decide(c.tool, c.in, "/work")
		fmt.Println(d.Allowed, d.Rule, d.Reason)
	}
	// Output:
	// true P3 Bash command "git log -1" is allowed by Bash(git:*) and Bash.
	// false P3 Bash command "git log; rm -rf /" is not allowed on this surface: a command with ; | & ` $ > < ( ), a newline, a carriage return or a NUL byte matches no pattern; run one simple command at a time. Allowed are Bash(git:*).
	// true P4 Read path "src/main.go" (resolved to "/work/src/main.go") is allowed by Read and Read(/work/**).
	// false P4 Read path "../etc/passwd" (resolved to "/etc/passwd") is not allowed on this surface: allowed are Read(/work/**).
}
