package allow

import (
	"path"
	"slices"
	"strings"
)

// Deny and ask entries also read a command through what runs another
// command (rule P14): leading assignments (FOO=1 git push), wrappers
// (env, command, exec, nice, nohup, timeout, time, stdbuf, xargs, sudo,
// doas), the shell's own (builtin, eval, !, coproc, a trap's action,
// compgen -C, jobs -x), a shell's -c string and a path before the name
// (/usr/bin/git).
// Each reading is added to the command as written, never put in its
// place, so a reading can only add denials; allow entries never see them.

// wrapper is how a command that runs another reads its own arguments.
type wrapper struct {
	arg, flags string   // short options with a separate argument, and without
	long       []string // long options with a separate argument (--name value)
	split      string   // the short and long option whose argument is a command (env -S)
	splitLong  string
	operands   int  // words before the command (timeout's duration)
	assign     bool // NAME=value words before the command (env)
}

var wrappers = map[string]wrapper{
	"env":      {arg: "uCS", flags: "i0v", long: []string{"--unset", "--chdir", "--split-string"}, split: "S", splitLong: "--split-string", assign: true},
	"command":  {flags: "pvV"},
	"exec":     {arg: "a", flags: "cl"},
	"nice":     {arg: "n", long: []string{"--adjustment"}},
	"nohup":    {},
	"timeout":  {arg: "sk", flags: "v", long: []string{"--signal", "--kill-after"}, operands: 1},
	"time":     {arg: "fo", flags: "apqv", long: []string{"--format", "--output"}},
	"stdbuf":   {arg: "ioe", long: []string{"--input", "--output", "--error"}},
	"xargs":    {arg: "adEILnPs", flags: "0bopirtxel", long: []string{"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}},
	"sudo":     {arg: "ugCDhprtTUR", flags: "AbBEeHiKklnPSsVv", long: []string{"--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--command-timeout", "--other-user", "--chroot"}},
	"doas":     {arg: "uC", flags: "nsL"},
	"setsid":   {flags: "cfw"},
	"ionice":   {arg: "cnp", flags: "t"},
	"taskset":  {flags: "acp", operands: 1},
	"chroot":   {long: []string{"--userspec", "--groups"}, operands: 1},
	"watch":    {arg: "nqd", flags: "bcegtwx", long: []string{"--interval"}},
	"su":       {arg: "cgGsw", flags: "lmpPf", long: []string{"--command", "--group", "--shell"}, split: "c", splitLong: "--command"},
	"script":   {arg: "cEIoOBmT", flags: "aefq", long: []string{"--command"}, split: "c", splitLong: "--command"},
	"busybox":  {},
	"unbuffer": {},
	// The shell's own: bash runs what follows these with no
	// metacharacter in sight (eval and trap are read in readings).
	"builtin": {},
	"!":       {},
	"coproc":  {},
	"jobs":    {flags: "lnprsx"},
	"compgen": {arg: "oAGWFCXPSV", flags: "abcdefgjksuvI", split: "C"},
}

// execs are the options of find that run the words after them.
var execs = []string{"-exec", "-execdir", "-ok", "-okdir"}

// maxReadings bounds the readings of one command, so that a decision
// stays linear in the command's length and the number of entries; a
// command with more may run anything (it is denied under deny entries).
const maxReadings = 64

// commandReadings is the readings of a command's words (readings),
// bounded by maxReadings.
func commandReadings(words []shellWord) [][]shellWord {
	return commandReadingsCarrying(words, false)
}

// commandReadingsCarrying is commandReadings, with git's other ways to
// push read as git push (withPushes), but for the carriers of an approved
// push when carrying.
func commandReadingsCarrying(words []shellWord, carrying bool) [][]shellWord {
	rs := withPushes(readings(words, maxShellDepth, nil), carrying)
	if len(rs) > maxReadings {
		rs = append(rs[:maxReadings-1], []shellWord{{wild: true, any: true}})
	}
	return rs
}

// shells run their -c string as a command.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true}

// maxShellDepth bounds how deep -c strings are read (sh -c "sh -c '…'").
const maxShellDepth = 3

// commandWords is a command's words as the shell passes them: its fields
// when nothing in it quotes or expands.
func commandWords(s string) []shellWord {
	if w := shellWords(s); w != nil {
		return w
	}
	fs := strings.Fields(s)
	out := make([]shellWord, len(fs))
	for i, f := range fs {
		out[i].text = f
	}
	return out
}

// readings appends to out the word lists that words may run: words
// itself, and what follows each assignment or wrapper, a shell's -c
// string, read the same way until depth runs out. Each word starts at
// most one reading per string, so there are at most as many readings as
// words (with a -c or -S string's own).
func readings(words []shellWord, depth int, out [][]shellWord) [][]shellWord {
	out = appendReading(out, words)
	for p := 0; p < len(words); {
		w := words[p]
		name := path.Base(w.text)
		wr, isWrapper := wrappers[name]
		switch {
		case isAssignment(w.text):
			p++
		case w.wild:
			return out // it may be any command: the patterns read it so as written
		case shells[name] && depth > 0:
			if s, ok := shellString(words[p+1:]); ok {
				out = readString(s, depth, out)
			}
			return out
		case name == "eval":
			return readString(evalString(words[p+1:]), depth, out)
		case name == "trap":
			if s, ok := trapAction(words[p+1:]); ok {
				out = readString(s, depth, out)
			}
			return out
		case name == "find":
			for k := p + 1; k < len(words); k++ {
				if slices.Contains(execs, words[k].text) && k+1 < len(words) {
					out = appendReading(out, words[k+1:])
				}
			}
			return out
		case isWrapper:
			var extra []int
			var splits []shellWord
			p, extra, splits = wr.command(words, p+1)
			for _, e := range extra {
				out = appendReading(out, words[e:])
			}
			for _, s := range splits {
				out = readString(s, depth, out)
			}
		default:
			return out
		}
		if p < len(words) {
			out = appendReading(out, words[p:])
		}
	}
	return out
}

// readString appends the readings of a string a shell or env -S runs as a
// command; a string that cannot be told may be any command.
func readString(s shellWord, depth int, out [][]shellWord) [][]shellWord {
	if s.any || depth <= 0 {
		return append(out, []shellWord{{wild: true, any: true}})
	}
	return readings(commandWords(s.text), depth-1, out)
}

// appendReading appends a reading, and the same with its first word's
// directory taken off when it has one (/usr/bin/git push runs git push).
func appendReading(out [][]shellWord, r []shellWord) [][]shellWord {
	out = append(out, r)
	if len(r) > 0 && !r[0].wild && strings.Contains(r[0].text, "/") {
		b := slices.Clone(r)
		b[0].text = path.Base(b[0].text)
		out = append(out, b)
	}
	return out
}

// isAssignment reports whether a word is NAME=value.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// evalString is the string eval runs: its arguments joined by spaces
// after an optional --; any of them a glob or a brace may make it any
// command.
func evalString(args []shellWord) shellWord {
	if len(args) > 0 && !args[0].wild && args[0].text == "--" {
		args = args[1:]
	}
	var s shellWord
	texts := make([]string, len(args))
	for i, a := range args {
		texts[i] = a.text
		s.any = s.any || a.wild
	}
	s.text = strings.Join(texts, " ")
	return s
}

// trapAction returns the action of a trap's arguments, the command the
// shell runs on its signal: the first operand after its options.
func trapAction(args []shellWord) (shellWord, bool) {
	for i, a := range args {
		switch {
		case a.wild:
			return shellWord{wild: true, any: true}, true
		case a.text == "--":
			if i+1 < len(args) {
				return args[i+1], true
			}
			return shellWord{}, false
		case len(a.text) > 1 && a.text[0] == '-':
		default:
			return a, true
		}
	}
	return shellWord{}, false
}

// shellString returns the string a shell's arguments run with -c: the
// first operand after an option cluster holding c.
func shellString(args []shellWord) (shellWord, bool) {
	withC := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a.wild:
			return shellWord{wild: true, any: true}, true // it may be -c and anything
		case a.text == "--":
			if withC && i+1 < len(args) {
				return args[i+1], true
			}
			return shellWord{}, false
		case a.text == "-o" || a.text == "+o" || a.text == "-O" || a.text == "+O":
			i++
		case len(a.text) > 1 && (a.text[0] == '-' || a.text[0] == '+') && !strings.HasPrefix(a.text, "--"):
			withC = withC || strings.IndexByte(a.text[1:], 'c') >= 0
		case strings.HasPrefix(a.text, "--"):
		default:
			return a, withC
		}
	}
	return shellWord{}, false
}

// command reads a wrapper's options from words[p:]: the index of the
// command it runs (len(words) when none), the other places a command may
// start where an option the table does not know may or may not take the
// next word, and the strings of its options that run a command.
func (wr wrapper) command(words []shellWord, p int) (int, []int, []shellWord) {
	var extra []int
	var splits []shellWord
	operands := wr.operands
	for ; p < len(words); p++ {
		w := words[p]
		switch {
		case wr.assign && isAssignment(w.text):
			continue
		case w.wild:
			return p, extra, splits // the patterns read it as a command that may be anything
		case w.text == "--":
			p++
			for ; operands > 0 && p < len(words); operands-- {
				p++
			}
			return p, extra, splits
		case strings.HasPrefix(w.text, "--"):
			name, _, attached := strings.Cut(w.text, "=")
			if attached {
				if wr.splitLong != "" && name == wr.splitLong {
					splits = append(splits, shellWord{text: w.text[len(name)+1:]})
				}
				continue
			}
			if slices.Contains(wr.long, name) {
				if p+1 < len(words) && name == wr.splitLong {
					splits = append(splits, words[p+1])
				}
				p++
				continue
			}
			p, extra = unknown(words, p, extra)
		case len(w.text) > 1 && w.text[0] == '-':
			p, extra, splits = wr.cluster(words, p, extra, splits)
		case operands > 0:
			operands--
		default:
			return p, extra, splits
		}
	}
	return p, extra, splits
}

// cluster reads one cluster of short options at words[p] and returns the
// index of its last word.
func (wr wrapper) cluster(words []shellWord, p int, extra []int, splits []shellWord) (int, []int, []shellWord) {
	opts := words[p].text[1:]
	for i := 0; i < len(opts); i++ {
		c := opts[i]
		switch {
		case strings.IndexByte(wr.arg, c) >= 0:
			split := strings.IndexByte(wr.split, c) >= 0
			if i+1 < len(opts) { // the argument is attached: -n5
				if split {
					splits = append(splits, shellWord{text: opts[i+1:]})
				}
				return p, extra, splits
			}
			if p+1 < len(words) && split {
				splits = append(splits, words[p+1])
			}
			return p + 1, extra, splits
		case strings.IndexByte(wr.flags, c) < 0:
			p, extra = unknown(words, p, extra) // nice -5, an option of another version
			return p, extra, splits
		}
	}
	return p, extra, splits
}

// unknown is an option the table does not know at words[p]: it may take
// the next word as its argument, so the command may start at either. The
// next word is read as a command (an extra reading) and then as the
// option's argument; it returns the index of the last word read.
func unknown(words []shellWord, p int, extra []int) (int, []int) {
	if p+1 < len(words) && !strings.HasPrefix(words[p+1].text, "-") {
		return p + 1, append(extra, p+1)
	}
	return p, extra
}

// mayRunAfterOptions reports whether words may run what the command
// pattern CMD SUB... admits with options before or between its words
// (git -C . push): the first word CMD, then SUB... in order among the
// others, and for a pattern without :* nothing after them but words that
// may vanish. A glob may stand for those of SUB it matches, in a row; a
// word that may be any words may be the rest. It over-approximates on
// purpose (git log --grep push meets git push:*): it only adds denials.
func mayRunAfterOptions(words []shellWord, c cmdPattern) bool {
	pw := c.words
	if len(pw) == 0 {
		return false
	}
	j := 0
	for k, w := range words {
		switch {
		case w.any:
			return true
		case w.wild:
			for j < len(pw) && globMay(w.text, pw[j]) {
				j++
			}
		case w.text == pw[j]:
			j++
		}
		if j == 0 {
			return false // another command
		}
		if j == len(pw) {
			return c.wild || mayVanish(words[k+1:])
		}
	}
	return false
}

// mayVanish reports whether every word may expand to none (a glob).
func mayVanish(words []shellWord) bool {
	for _, w := range words {
		if !w.wild {
			return false
		}
	}
	return true
}

// globMay reports whether a glob may expand to word; a glob that cannot be
// read may.
func globMay(glob, word string) bool {
	ok, err := path.Match(glob, word)
	return ok || err != nil
}
