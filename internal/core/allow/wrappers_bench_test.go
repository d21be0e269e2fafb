package allow

import (
	"fmt"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/cputime"
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

// BenchmarkP16DenyEntriesPerDecision: what one sandboxed Bash call costs
// the decision under 1,000 deny entries against 10, in one loop, rounds
// interleaved: the call decided on its command line, the names of the
// programs to know by their files (ExecNames, once a call) and the
// judgement of each program the command starts (ExecDecide), here the
// three that `env FOO=1 nice -n 5 git log --oneline` starts, and two
// more a script of it could (issue 41's goal: at most 1.2).
func BenchmarkP16DenyEntriesPerDecision(b *testing.B) {
	in := map[string]any{"command": "env FOO=1 nice -n 5 git log --oneline"}
	programs := [][]string{{"env", "FOO=1", "nice", "-n", "5", "git", "log", "--oneline"}, {"nice", "-n", "5", "git", "log", "--oneline"},
		{"git", "log", "--oneline"}, {"grep", "x"}, {"tool7", "run", "--all"}}
	effective := func(n int) *Effective {
		var deny []string
		for i := range n {
			deny = append(deny, fmt.Sprintf("Bash(git push%d:*)", i), fmt.Sprintf("Bash(tool%dx run:*)", i))
		}
		return chainDecl(b, Decl{Allow: []string{"Bash"}, Deny: deny})
	}
	small, large := effective(5), effective(500) // 10 and 1,000 entries
	round := func(e *Effective) {
		for range 200 {
			if d := e.Decide("Bash", in, "/"); !d.Allowed {
				b.Fatalf("the command was refused: %s", d.Reason)
			}
			if len(e.ExecNames("Bash")) == 0 {
				b.Fatal("no program to know by its file")
			}
			for _, p := range programs {
				if d := e.ExecDecide("Bash", p, "/"); !d.Allowed {
					b.Fatalf("%v refused: %s", p, d.Reason)
				}
			}
		}
	}
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		var d [2]time.Duration
		for j := range 2 {
			k := (i + j) % 2
			c0 := cputime.Process()
			round([]*Effective{small, large}[k])
			d[k] = cputime.Process() - c0
		}
		if d[0] > 0 {
			ratios = append(ratios, float64(d[1])/float64(d[0]))
		}
	}
	b.ReportMetric(cputime.Median(ratios), "1000/10")
}
