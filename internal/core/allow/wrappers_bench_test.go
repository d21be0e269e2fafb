package allow

import (
	"fmt"
	"testing"
)

// BenchmarkP14DenyLongLists decides allowed Bash calls under N deny
// entries (git subcommands and other commands) for N = 10 and 1,000:
// reading a command through wrappers and options (P14) must stay linear
// in the command's length and the number of entries (issue 32).
func BenchmarkP14DenyLongLists(b *testing.B) {
	calls := []map[string]any{
		{"command": "git status --short"},
		{"command": "env FOO=1 nice -n 5 git -C . log --oneline 'README.md'"},
		{"command": "tool7 run --all"},
	}
	for _, n := range []int{10, 1000} {
		var deny []string
		for i := range n {
			deny = append(deny, fmt.Sprintf("Bash(git push%d:*)", i), fmt.Sprintf("Bash(tool%dx run:*)", i))
		}
		e := chainDecl(b, Decl{Allow: []string{"Bash"}, Deny: deny})
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for b.Loop() {
				for _, in := range calls {
					if !e.Decide("Bash", in, "/").Allowed {
						b.Fatal("wrong decision")
					}
				}
			}
		})
	}
}
