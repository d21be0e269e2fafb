package allow

import (
	"testing"
)

// TestP16GitsOtherWaysToPushAreGitPush: an entry naming git push binds
// git send-pack, git http-push and git receive-pack, by subcommand and by
// dashed name, on the command line and at a program's start; fetching and
// other subcommands stay allowed; an approved push's carriers run (V9).
func TestP16GitsOtherWaysToPushAreGitPush(t *testing.T) {
	e := chainDecl(t, Decl{
		Allow: []string{"Bash(git:*)", "Bash(git-receive-pack:*)", "Bash(git-send-pack:*)", "Bash(sh:*)"},
		Deny:  []string{"Bash(git push:*)"},
	})
	decideCommands(t, e, []commandCase{
		{"send-pack", "git send-pack ../r.git main", "denied P14", "Bash(git push:*)"},
		{"send-pack after an option", "git -C . send-pack ../r.git main", "denied P14", "Bash(git push:*)"},
		{"http-push", "git http-push https://h/r.git main", "denied P14", "Bash(git push:*)"},
		{"receive-pack", "git receive-pack ../r.git", "denied P14", "Bash(git push:*)"},
		{"a glob that may be send-pack", "git send-pac? ../r.git main", "denied P14", "Bash(git push:*)"},
		{"the dashed name", "/usr/lib/git-core/git-receive-pack ../r.git", "denied P14", "Bash(git push:*)"},
		{"the dashed name in sh -c, as git starts it", "sh -c \"git-receive-pack '../r.git'\"", "denied P14", "Bash(git push:*)"},
		{"fetch-pack fetches", "git fetch-pack ../r.git main", "allowed", ""},
		{"upload-pack serves a fetch", "git upload-pack ../r.git", "allowed", ""},
	})
	for _, tc := range []struct {
		words    []string
		carrying bool
		denied   bool
	}{
		{[]string{"git-receive-pack", "../r.git"}, false, true},
		{[]string{"git-send-pack", "--stateless-rpc", "https://h/r"}, false, true},
		{[]string{"git", "send-pack", "../r.git", "main"}, false, true},
		{[]string{"git-http-push", "../r.git"}, false, true},
		{[]string{"git", "fetch-pack", "../r.git"}, false, false},
		// An approved push's carriers run; a push of its own does not.
		{[]string{"git-receive-pack", "../r.git"}, true, false},
		{[]string{"sh", "-c", "git-receive-pack '../r.git'"}, true, false},
		{[]string{"git", "send-pack", "--stateless-rpc", "--helper-status", "https://h/r", "--stdin"}, true, false},
		{[]string{"git", "send-pack", "../r.git", "main"}, true, true},
		{[]string{"git", "push", "../r.git", "main"}, true, true},
	} {
		if d := e.ExecDecideCarrying("Bash", tc.words, "/", tc.carrying); d.Allowed == tc.denied {
			t.Errorf("program %q (carrying %v): allowed %v: %s", tc.words, tc.carrying, d.Allowed, d.Reason)
		}
	}
	for cmd, want := range map[string]bool{"git push": true, "git -C . send-pack x": true, "env git-receive-pack x": true, "git fetch": false} {
		if Pushes(cmd) != want {
			t.Errorf("Pushes(%q) = %v", cmd, !want)
		}
	}
}
