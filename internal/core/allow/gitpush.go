package allow

import (
	"path"
	"slices"
	"strings"
)

// git has other ways to push than git push, and deny and ask entries read
// them as git push (rule P16; the hostile probe's V9): git send-pack, the
// client side, which git push runs in its own process and git's HTTP
// helper starts as a program; git http-push (WebDAV); and git
// receive-pack, the remote's side, which git starts for a remote on a
// local path and which writes its refs. Each is known by its subcommand
// (git send-pack, git -C . send-pack) and by its dashed name
// (git-receive-pack, which git starts, is git run under that name), so
// that Bash(git push:*) binds git send-pack ../r.git main as it binds
// git push ../r.git main, on the command line and at every program start.
// Like every reading, this only adds denials; allow entries never see it.
var gitPushes = map[string]bool{"send-pack": true, "http-push": true, "receive-pack": true}

// withPushes appends to rs, for each reading that runs one of git's other
// ways to push, the same reading as git push. carrying leaves out those
// that carry a push another program made (carries): the call's approval
// covers them.
func withPushes(rs [][]shellWord, carrying bool) [][]shellWord {
	for _, r := range rs {
		if p, ok := asPush(r); ok && !(carrying && carries(r)) {
			rs = append(rs, p)
		}
	}
	return rs
}

// asPush is reading r as git push, when r runs git send-pack, http-push or
// receive-pack: its subcommand (the first word that may be one) read as
// push, or its dashed name as git push.
func asPush(r []shellWord) ([]shellWord, bool) {
	if len(r) == 0 || r[0].wild {
		return nil, false
	}
	name := path.Base(r[0].text)
	if sub, ok := strings.CutPrefix(name, "git-"); ok && (gitPushes[sub] || sub == "push") {
		return append([]shellWord{{text: "git"}, {text: "push"}}, r[1:]...), true
	}
	if name != "git" {
		return nil, false
	}
	for i, w := range r[1:] {
		// A word that may be any words meets every entry already.
		if !w.any && (w.wild && mayBePush(w.text) || !w.wild && gitPushes[w.text]) {
			p := slices.Clone(r)
			p[0], p[i+1] = shellWord{text: "git"}, shellWord{text: "push"}
			return p, true
		}
	}
	return nil, false
}

// mayBePush reports whether a glob may expand to one of gitPushes.
func mayBePush(glob string) bool {
	for sub := range gitPushes {
		if globMay(glob, sub) {
			return true
		}
	}
	return false
}

// carries reports whether the push reading r runs what carries a push
// that another program of git's made: git receive-pack, the remote's
// side of a push to a local path, or git send-pack --stateless-rpc, which
// speaks only to git's HTTP helper on its standard input and output.
func carries(r []shellWord) bool {
	words := r
	if name := path.Base(r[0].text); strings.HasPrefix(name, "git-") {
		words = append([]shellWord{{text: "git"}, {text: strings.TrimPrefix(name, "git-")}}, r[1:]...)
	}
	for i, w := range words[1:] {
		switch {
		case w.wild:
			return false
		case w.text == "receive-pack":
			return true
		case w.text == "send-pack":
			return slices.ContainsFunc(words[i+2:], func(w shellWord) bool { return !w.wild && w.text == "--stateless-rpc" })
		}
	}
	return false
}

// Pushes reports whether command may run git push or one of git's other
// ways to push, as deny and ask entries read it: an approval of it covers
// the programs git starts to carry its push (ExecDecide's carrying).
func Pushes(command string) bool {
	push := cmdPattern{words: []string{"git", "push"}, wild: true}
	for _, r := range commandReadings(commandWords(strings.Join(strings.Fields(command), " "))) {
		if mayRun(r, push) || mayRunAfterOptions(r, push) {
			return true
		}
	}
	return false
}
