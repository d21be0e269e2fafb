package allow

import (
	"fmt"
	"slices"
	"testing"
)

// TestP14EntriesByTwoWordsDecideAsAll: the index of command entries by
// their first two words (many entries sharing git) decides every command,
// the command line and each program a sandbox judges (P16), exactly as
// reading every entry of the first word does: options before the
// subcommand, wrappers, -c strings, quotes and globs, exact and prefix
// patterns, one-word ones, odd spacing, ask entries among them.
func TestP14EntriesByTwoWordsDecideAsAll(t *testing.T) {
	deny := []string{"Bash(git)", "Bash(git  reset:*)", "Bash(git push --force:*)", "Bash(git clean -fdx)"}
	for i := range 20 {
		deny = append(deny, fmt.Sprintf("Bash(git sub%d:*)", i), fmt.Sprintf("Bash(git sub%d x)", i))
	}
	ask := []string{"Bash(git commit:*)", "Bash(git tag)"}
	for i := range 10 {
		ask = append(ask, fmt.Sprintf("Bash(git ask%d:*)", i))
	}
	e := chainDecl(t, Decl{Allow: []string{"Bash"}, Deny: deny, Ask: ask})
	allowed := []string{"Bash(git status)", "Bash(git  log:*)", "Bash(git)"}
	for i := range 20 {
		allowed = append(allowed, fmt.Sprintf("Bash(git sub%d:*)", i), fmt.Sprintf("Bash(git ok%d x)", i))
	}
	listed := chainDecl(t, Decl{Allow: allowed})
	commands := []string{
		"git", "git status", "git sub3", "git sub3 --all", "git sub33", "git sub3x", "git -C . sub7 y", "git --git-dir=x sub4",
		"git sub5 x", "git sub5 x y", "git  reset --hard", "git reset --hard", "git push --force origin", "git push origin --force",
		"git clean -fdx", "git clean -fd", "git commit -m x", "git -c a=b commit", "git tag", "git tag v1", "git ask2 now",
		"env A=1 git sub9", "nice -n 5 git sub1", "sudo git sub2", "bash -c 'git sub6 z'", "sh -c \"git -C x ask3\"",
		"git 'sub8'", "git sub*", "git s?b1", "git \"$X\"", "git * x", "command git sub0", "xargs git sub11", "git status sub1",
		"timeout 5 git push --force", "/usr/bin/git sub12", "git sub12\tx", "git ok3 x", "git ok3 x y", "git ok3", "git  log -1",
		"git log -1", "git status", "git status ", "git sub1 ok1 x",
	}
	programs := [][]string{{"git", "sub3"}, {"git", "-C", "d", "sub4", "a"}, {"git", "status"}, {"git"}, {"git", "sub5", "x"},
		{"git", "push", "--force"}, {"git", "commit"}, {"env", "git", "sub2"}, {"git", "sub*"}, {"git", "tag"}, {"git", "x", "sub9"}}
	decide := func() (out []Decision) {
		for _, c := range commands {
			out = append(out, e.Decide("Bash", map[string]any{"command": c}, "/w"))
		}
		for _, c := range commands {
			out = append(out, listed.Decide("Bash", map[string]any{"command": c}, "/w"))
		}
		for _, p := range programs {
			out = append(out, e.ExecDecide("Bash", p, "/w"))
		}
		return out
	}
	indexed := decide()
	old := fewEntries
	fewEntries = 1 << 30
	t.Cleanup(func() { fewEntries = old })
	all := decide()
	n := 0
	for i := range all {
		what := fmt.Sprint(programs[max(0, i-2*len(commands))])
		if i < 2*len(commands) {
			what = commands[i%len(commands)]
		}
		if indexed[i].Allowed != all[i].Allowed || indexed[i].Ask != all[i].Ask || indexed[i].Reason != all[i].Reason || !slices.Equal(indexed[i].Entries, all[i].Entries) {
			t.Errorf("%s: by two words %+v, reading all %+v", what, indexed[i], all[i])
		}
		if !all[i].Allowed || all[i].Ask {
			n++
		}
	}
	if n < len(all)/3 || n > len(all)*4/5 {
		t.Errorf("only %d of %d decisions refuse or ask: the cases do not reach the entries", n, len(all))
	}
}
