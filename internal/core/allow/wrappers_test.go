package allow

import (
	"strings"
	"testing"
)

// TestP14WrappersHideNoDeniedCommand: a deny or ask entry meets a command
// run through assignments, wrappers, a shell's -c string, a path or
// options before its subcommand; commands that run something else stay
// allowed, and allow entries still read the command as written.
func TestP14WrappersHideNoDeniedCommand(t *testing.T) {
	e := chainDecl(t, Decl{
		Allow: []string{"Bash(git:*)", "Bash(env:*)", "Bash(envoy:*)", "Bash(sh:*)", "Bash(bash:*)", "Bash(sudo:*)", "Bash(timeout:*)", "Bash(nice:*)",
			"Bash(xargs:*)", "Bash(find:*)", "Bash(su:*)", "Bash(taskset:*)", "Bash(ionice:*)", "Bash(command:*)", "Bash(exec:*)", "Bash(FOO=1:*)", "Bash(/usr/bin/git:*)", "Bash(stdbuf:*)", "Bash(time:*)", "Bash(nohup:*)", "Bash(doas:*)"},
		Deny: []string{"Bash(git push:*)", "Bash(git reset --hard)", "Bash(rm:*)"},
		Ask:  []string{"Bash(git commit:*)"},
	})
	decideCommands(t, e, []commandCase{
		{"an option before the subcommand", "git -C . push", "denied P14", "Bash(git push:*)"},
		{"a long option before the subcommand", "git --no-pager push origin", "denied P14", "Bash(git push:*)"},
		{"a message that says push: the safe direction", "git log --grep push", "denied P14", "Bash(git push:*)"},
		{"env", "env git push", "denied P14", "Bash(git push:*)"},
		{"env with options and assignments", "env -i -u HOME FOO=1 git push", "denied P14", "Bash(git push:*)"},
		{"env -S runs its string", "env -S 'git push'", "denied P14", "Bash(git push:*)"},
		{"env --split-string=", "env '--split-string=git push'", "denied P14", "Bash(git push:*)"},
		{"command", "command git push", "denied P14", "Bash(git push:*)"},
		{"exec", "exec -a x git push", "denied P14", "Bash(git push:*)"},
		{"a leading assignment", "FOO=1 git push", "denied P14", "Bash(git push:*)"},
		{"nice -n", "nice -n 5 git push", "denied P14", "Bash(git push:*)"},
		{"nice -5, an option the table does not know", "nice -5 git push", "denied P14", "Bash(git push:*)"},
		{"nohup", "nohup git push", "denied P14", "Bash(git push:*)"},
		{"timeout with options and a duration", "timeout -k 1 -s KILL 5 git push", "denied P14", "Bash(git push:*)"},
		{"time", "time -p git push", "denied P14", "Bash(git push:*)"},
		{"stdbuf", "stdbuf -o L git push", "denied P14", "Bash(git push:*)"},
		{"xargs", "xargs -n 1 git push", "denied P14", "Bash(git push:*)"},
		{"sudo with a user", "sudo -u bob git push", "denied P14", "Bash(git push:*)"},
		{"sudo with an option it may not take the next word for", "sudo --frob x git push", "denied P14", "Bash(git push:*)"},
		{"doas", "doas -u bob git push", "denied P14", "Bash(git push:*)"},
		{"wrappers in a row", "env FOO=1 nice -n 2 timeout 5 sudo git push", "denied P14", "Bash(git push:*)"},
		{"sh -c", "sh -c 'git push'", "denied P14", "Bash(git push:*)"},
		{"bash -c with options", `bash -e -c "git push origin"`, "denied P14", "Bash(git push:*)"},
		{"bash -lc", `bash -lc "git push"`, "denied P14", "Bash(git push:*)"},
		{"nested -c strings", `sh -c "bash -c 'env git push'"`, "denied P14", "Bash(git push:*)"},
		{"a path before the name", "/usr/bin/git push", "denied P14", "Bash(git push:*)"},
		{"find -exec", "find . -exec git push {} +", "denied P14", "Bash(git push:*)"},
		{"su -c", "su -c 'git push' bob", "denied P14", "Bash(git push:*)"},
		{"taskset with a mask", "taskset 3 git push", "denied P14", "Bash(git push:*)"},
		{"ionice", "ionice -c 3 git push", "denied P14", "Bash(git push:*)"},
		{"more readings than a decision reads: it may run anything", strings.Repeat("sudo --x git ", 40) + "status", "denied P14", "Bash(rm:*)"},
		{"find without -exec", "find . -name push", "allowed", ""},
		{"an exact entry through a wrapper", "env git reset --hard", "denied P14", "Bash(git reset --hard)"},
		{"an exact entry with an option before it", "git -C . reset --hard", "denied P14", "Bash(git reset --hard)"},
		{"a glob that may be the subcommand", "git -C . pus?", "denied P14", "Bash(git push:*)"},
		{"an ask through a wrapper", "env git commit -m x", "ask P14", "Bash(git commit:*)"},
		{"an ask with an option before it", "git -c x=y commit", "ask P14", "Bash(git commit:*)"},
		{"another subcommand", "git status", "allowed", ""},
		{"envoy is not env", "envoy push", "allowed", ""},
		{"env running another command", "env FOO=1 git status", "allowed", ""},
		{"a shell running another command", "sh -c 'git status'", "allowed", ""},
		{"a glob that cannot be the subcommand", "git add *.go", "allowed", ""},
		{"an exact entry with another word after it", "env git reset --hard HEAD", "allowed", ""},
		{"the word after sudo -u is its user", "sudo -u rm ls", "allowed", ""},
		{"rm as an argument, not a command", "git log --grep rm", "allowed", ""},
	})
	// Allow entries still read the command as written.
	only := chainDecl(t, Decl{Allow: []string{"Bash(git push:*)"}})
	for _, c := range []string{"env git push", "git -C . push", "sh -c 'git push'"} {
		if d := only.Decide("Bash", map[string]any{"command": c}, "/"); d.Allowed {
			t.Errorf("%s is allowed by Bash(git push:*): allow entries must not read through wrappers", c)
		}
	}
}

// FuzzP14WrappersOnlyAddDenials: a command a deny pattern meets as
// written, or as the shell splits it, is still met by the readings.
func FuzzP14WrappersOnlyAddDenials(f *testing.F) {
	for _, s := range []string{"git push", "env git push", "git 'push'", "sudo -u x git -C . push", "sh -c 'git push'", "git pus?", "timeout 5", "FOO=1", "nice -n"} {
		f.Add(s, "git push:*")
	}
	f.Fuzz(func(t *testing.T, command, pattern string) {
		if hasCommandMeta(command) || hasCommandMeta(pattern) || strings.TrimSpace(command) == "" {
			t.Skip()
		}
		subj := strings.Join(strings.Fields(command), " ")
		m, _, err := commandMatcher(pattern)
		if err != nil {
			t.Skip()
		}
		before := m.match(subj)
		if w := shellWords(subj); w != nil {
			before = before || mayRun(w, cmdPatternOf(pattern))
		}
		if !before {
			return
		}
		for _, r := range commandReadings(commandWords(subj)) {
			if mayRun(r, cmdPatternOf(pattern)) || mayRunAfterOptions(r, cmdPatternOf(pattern)) {
				return
			}
		}
		t.Errorf("%q meets %q as written, but none of its readings does", command, pattern)
	})
}

// TestP14ShellBuiltinsHideNoDeniedCommand: the shell's own ways of running
// a command (eval, builtin, the ! and coproc reserved words, a trap's
// action, compgen -C, jobs -x) run what their words say, with no
// metacharacter in sight, so a deny or ask entry meets the command they
// run; what they run otherwise stays allowed.
func TestP14ShellBuiltinsHideNoDeniedCommand(t *testing.T) {
	e := chainDecl(t, Decl{
		Allow: []string{"Bash"},
		Deny:  []string{"Bash(git push:*)", "Bash(rm:*)"},
		Ask:   []string{"Bash(git commit:*)"},
	})
	decideCommands(t, e, []commandCase{
		{"eval", "eval git push", "denied P14", "Bash(git push:*)"},
		{"eval of one quoted string", "eval 'git push origin'", "denied P14", "Bash(git push:*)"},
		{"eval joins its words and reads them again", `eval "git" "'push'"`, "denied P14", "Bash(git push:*)"},
		{"eval --", "eval -- rm -rf x", "denied P14", "Bash(rm:*)"},
		{"eval of a glob that may be anything", "eval g*", "denied P14", "Bash(git push:*)"},
		{"builtin", "builtin eval git push", "denied P14", "Bash(git push:*)"},
		{"builtin command", "builtin command git push", "denied P14", "Bash(git push:*)"},
		{"the ! reserved word", "! git push", "denied P14", "Bash(git push:*)"},
		{"! and time", "! time -p rm x", "denied P14", "Bash(rm:*)"},
		{"coproc", "coproc git push", "denied P14", "Bash(git push:*)"},
		{"a trap's action", `trap "git push" EXIT`, "denied P14", "Bash(git push:*)"},
		{"a trap's action after --", "trap -- 'rm -rf x' 0", "denied P14", "Bash(rm:*)"},
		{"compgen -C", "compgen -C 'rm -rf x' y", "denied P14", "Bash(rm:*)"},
		{"compgen -C attached", "compgen '-Crm x' y", "denied P14", "Bash(rm:*)"},
		{"jobs -x", "jobs -x rm x", "denied P14", "Bash(rm:*)"},
		{"wrappers around eval", "command eval env git push", "denied P14", "Bash(git push:*)"},
		{"eval in a -c string", `sh -c "eval git push"`, "denied P14", "Bash(git push:*)"},
		{"an ask through eval", "eval git commit -m x", "ask P14", "Bash(git commit:*)"},
		{"eval of another command", "eval git status", "allowed", ""},
		{"builtin echo", "builtin echo rm", "allowed", ""},
		{"a trap that resets", "trap - EXIT", "allowed", ""},
		{"a trap's action of another command", `trap "git status" EXIT`, "allowed", ""},
		{"compgen without -C", "compgen -W 'rm git' r", "allowed", ""},
		{"jobs without -x", "jobs -l", "allowed", ""},
	})
}

// commandCase is a Bash command and the outcome a chain gives it.
type commandCase struct {
	note, command, want string
	entry               string // the entry the sentence names, for a denial or an ask
}

// decideCommands decides each case's command under e.
func decideCommands(t *testing.T, e *Effective, cases []commandCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			d := e.Decide("Bash", map[string]any{"command": tc.command}, "/")
			if got := outcome(d); got != tc.want {
				t.Fatalf("%s: %s, want %s: %s", tc.command, got, tc.want, d.Reason)
			}
			if tc.entry != "" && !strings.Contains(d.Reason, tc.entry) {
				t.Errorf("%s: the sentence does not name %s: %s", tc.command, tc.entry, d.Reason)
			}
		})
	}
}
