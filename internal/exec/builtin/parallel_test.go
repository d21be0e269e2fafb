package builtin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"aimon.dev/gw/tools"
)

// genTree writes a tree of files in nested directories, with "needle" on
// lines spread by a fixed seed, for holding the parallel search to the
// sequential one.
func genTree(t *testing.T, dir string, files int) {
	t.Helper()
	r := rand.New(rand.NewPCG(32, 4))
	for i := range files {
		var b strings.Builder
		for l := range 5 + r.IntN(60) {
			if r.IntN(7) == 0 {
				fmt.Fprintf(&b, "line %d has a needle %d é\n", l, r.IntN(1000))
			} else {
				fmt.Fprintf(&b, "line %d is plain hay\n", l)
			}
		}
		write(t, dir, fmt.Sprintf("d%d/e%d/f%03d.txt", i%5, i%3, i), b.String())
	}
	write(t, dir, "d0/big.txt", strings.Repeat("needle in a long line of hay "+strings.Repeat("x", 200)+"\n", 400))
}

// TestR6GrepInParallelSaysWhatTheWalkSays: with workers, Grep's output is
// byte for byte the one-file-at-a-time walk's, in every mode, with context
// lines, and where head_limit or MaxOutput cut it.
func TestR6GrepInParallelSaysWhatTheWalkSays(t *testing.T) {
	env := session(t)
	genTree(t, env.Workdir, 150)
	env.Scope = &tools.Scope{Anchor: env.Workdir, Allows: func(p string) bool { return !strings.Contains(p, "/e2/") }}
	for _, tt := range []struct{ note, in string }{
		{"files with matches", `{"pattern":"needle"}`},
		{"content with line numbers", `{"pattern":"needle \\d+ é","output_mode":"content","-n":true}`},
		{"content with context, groups parted", `{"pattern":"needle 1","output_mode":"content","-C":1,"-n":true}`},
		{"count", `{"pattern":"needle","output_mode":"count"}`},
		{"head_limit cuts", `{"pattern":"needle","output_mode":"content","head_limit":37}`},
		{"MaxOutput cuts", `{"pattern":"hay","output_mode":"content","-B":2}`},
		{"a glob", `{"pattern":"needle","glob":"d1/**/*.txt","output_mode":"count"}`},
		{"bad input: no match", `{"pattern":"absent-word"}`},
	} {
		t.Run(tt.note, func(t *testing.T) {
			grepWorkers = 1
			want := call(t, env, "Grep", tt.in)
			for _, w := range []int{2, 4, 9} {
				grepWorkers = w
				got := call(t, env, "Grep", tt.in)
				if got.Text != want.Text || got.IsError != want.IsError {
					t.Errorf("%d workers:\n%.2000s\nwant (sequential):\n%.2000s", w, got.Text, want.Text)
				}
			}
			grepWorkers = 1
		})
	}
}

// TestR6GrepInParallelStopsWhenCancelled: a search cancelled while its
// workers run stops and says so, in each mode of cancelling.
func TestR6GrepInParallelStopsWhenCancelled(t *testing.T) {
	env := session(t)
	genTree(t, env.Workdir, 150)
	defer func() { grepWorkers = 1 }()
	grepWorkers = 4
	for _, tt := range []struct {
		note  string
		after int // files the walk hands on before the cancel; -1: cancelled before the call
	}{
		{"cancelled before the call", -1},
		{"cancelled at the first file", 0},
		{"cancelled mid-walk", 40},
	} {
		t.Run(tt.note, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.after < 0 {
				cancel()
			}
			seen := 0
			env.Scope = &tools.Scope{Anchor: env.Workdir, Allows: func(string) bool {
				if seen == tt.after {
					cancel()
				}
				seen++
				return true
			}}
			tool, _ := Lookup("Grep")
			r := tool.Run(ctx, env, input(t, `{"pattern":"needle 7","output_mode":"content"}`))
			if !r.IsError || !strings.Contains(strings.ToLower(r.Text), "cancel") {
				t.Errorf("a cancelled Grep gave:\n%.500s", r.Text)
			}
			if tt.after >= 0 && seen > tt.after+2 {
				t.Errorf("the walk went on for %d files after the cancel", seen-tt.after-1)
			}
		})
	}
}
