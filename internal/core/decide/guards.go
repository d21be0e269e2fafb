package decide

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// The guards judge a call the lists allow or ask for by what its path
// really is, for a client that opens the path itself (Claude Code under
// the hook) and for any writer (rules R6, R8, R9, P4, P14).

// landing judges a path subject by the deny and ask entries where it
// really leads too (rule P14): a link the agent made, or the kernel's
// /proc/self/root, takes no client that opens the path itself (Claude Code
// under the hook) into what they withhold. The allow lists judge the path
// as written only, so that an operator's link above an allowed directory
// changes nothing; the built-ins' anchors hold them again when they run.
func (dc *Decider) landing(p *Prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.Tool.Subject
	if s == nil || s.Kind != "path" || len(p.Eff.Withheld(p.Name)) == 0 {
		return d
	}
	at, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	real := dc.FS.LandsAt(at) // a dangling link where it points: Claude Code writes there
	if real == filepath.Clean(at) {
		return d
	}
	there := maps.Clone(in)
	there[s.Field] = real
	r := p.Eff.Decide(p.Name, there, dc.Workdir)
	if r.Rule != rule.P14 || r.Allowed || r.Ask && d.Ask {
		return d
	}
	d.Allowed, d.Ask, d.Rule, d.Entries = false, r.Ask, rule.P14, r.Entries
	d.Reason = fmt.Sprintf("%s path %q leads through a symbolic link to %q, and there: %s", p.Name, at, real, r.Reason)
	return d
}

// leading judges an allowed path subject by the allow lists where it
// really leads, when the client opens the path itself (Claude Code under
// the hook) or the tool's own program does (an MCP server, a plugin), as
// the built-ins' anchors hold them (rule R6): a link the
// agent made inside an allowed directory takes no call out of what the
// lists allow. A link above the allowing entry's directory (an operator's
// /home leading to /data/home) moves the directory with it: a path that
// lands within that directory, resolved, stays allowed.
func (dc *Decider) leading(p *Prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.Tool.Subject
	if dc.ClientTools == "" && !p.Tool.OpensItself() || s == nil || s.Kind != "path" || !(d.Allowed || d.Ask) {
		return d
	}
	at, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	real := dc.FS.LandsAt(at)
	if real == filepath.Clean(at) {
		return d
	}
	there := maps.Clone(in)
	there[s.Field] = real
	if r := p.Eff.Decide(p.Name, there, dc.Workdir); r.Allowed || r.Ask {
		return d
	}
	anchor := Scope(p, d, dc.Workdir).Anchor
	if base := dc.FS.RealPath(anchor); anchor != "/" && (real == base || strings.HasPrefix(real, base+"/")) {
		return d
	}
	_, text := allow.Named(d.Entries, " and ")
	if text == "" {
		text = "the list"
	}
	return rule.Refused(rule.R6, fmt.Sprintf("%s path %q leads through a symbolic link to %q, which %s does not allow; Claude Code would open it there. Give the path where the file really is, inside what the list allows.", p.Name, at, real, text))
}

// protectSubject refuses a call that writes where the gateway reads or runs (rule
// R8), whatever the lists allow: under the hook, Claude Code's own Write
// and Edit write what was only decided here. The protected paths are
// the gateway's (FS.WriteRefusal); the call costs the resolution of its path.
func (dc *Decider) protectSubject(t *policy.Tool, in tools.Input, d rule.Decision) rule.Decision {
	if !writesPath(t) || !(d.Allowed || d.Ask) {
		return d
	}
	at, ok := in[t.Subject.Field].(string)
	if !ok {
		return d // no path, nothing written: the gate's and P5's to refuse
	}
	if id, why := dc.writeRefusal(at); why != "" {
		return rule.Refused(id, fmt.Sprintf("%s was not run: %s.", t.Name, why))
	}
	return d
}

// writeRefusal is why a write of path is refused, and by which rule: R9 for
// a file that makes a runtime call the gateway, else R8; "" when it may
// be written.
func (dc *Decider) writeRefusal(path string) (rule.ID, string) {
	why, gate := dc.FS.WriteRefusal(path)
	if gate {
		return rule.R9, why
	}
	return rule.R8, why
}

// protectWrites refuses a call the lists allow or ask for when a file its client
// writes besides the subject (Call.Writes) is where the gateway reads or
// runs (rule R8), or one that makes a runtime call it (rule R9).
func (dc *Decider) protectWrites(p *Prepared, d rule.Decision) rule.Decision {
	if !(d.Allowed || d.Ask) {
		return d
	}
	for _, w := range p.Writes {
		if id, why := dc.writeRefusal(w); why != "" {
			return rule.Refused(id, fmt.Sprintf("%s is refused: %s.", p.Name, why))
		}
	}
	return d
}

// writesPath reports whether a call of t writes the path its subject
// names: the file tools, and any path tool the policy says writes.
func writesPath(t *policy.Tool) bool {
	s := t.Subject
	return s != nil && s.Kind == "path" && (t.WritesFiles() || t.Effect == "write" || t.Effect == "destructive")
}

// secret refuses a call whose client reads the path itself (Claude Code's
// Read and Grep under the hook) where that path is, or a search below it
// reads, a secret of the gateway's: the key that seals exec's tickets or
// approvals, a TLS key (rule R8). The built-ins refuse these when they
// open them; a client's own tools are refused here, whatever the lists
// allow.
func (dc *Decider) secret(p *Prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.Tool.Subject
	if dc.ClientTools == "" || s == nil || s.Kind != "path" || !d.Allowed && !d.Ask {
		return d
	}
	at, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	real := dc.FS.LandsAt(at)
	held := dc.FS.Concealing(at, real)
	if held == "" && p.Tool.SearchesElsewhere() && (p.Name == "Grep" || p.Name == "grep_search") {
		if dc.FS.IsDir(real) {
			if held = dc.FS.ConcealedBelow(real); held == "" {
				held = dc.FS.ConcealedBelow(at)
			}
		}
	}
	if held == "" {
		return d
	}
	return rule.Refused(rule.R8, fmt.Sprintf("%s of %q was not run: %s is a secret of the gateway's (a key that seals its tickets or approvals), and no tool may read it (rule R8); give a path that does not hold it.", p.Name, at, held))
}

// reach keeps a search the gateway does not run (Claude Code's Grep and
// Glob) to what was decided (rules P4, P14, R7). Such a program reads the
// whole tree below its directory, where the built-ins visit only what the
// lists admit: a directory that holds a path a deny, ask or narrower allow
// entry withholds is refused (asked, when only ask entries withhold it),
// here and where a link leads, and so is a Glob pattern that leaves its
// directory. A path that is not a directory has no tree.
func (dc *Decider) reach(p *Prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.Tool.Subject
	if !p.Tool.SearchesElsewhere() || s == nil || s.Kind != "path" || !d.Allowed && !d.Ask {
		return d
	}
	dir, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	if pattern, _ := in["pattern"].(string); p.Name == "Glob" && leavesDir(pattern) {
		d.Allowed, d.Ask, d.Rule, d.Entries = false, false, rule.P4, nil
		d.Reason = fmt.Sprintf("Glob pattern %q may leave its directory %q (an absolute pattern or a '..'), where the decision was made; give the directory as path and a pattern relative to it.", pattern, dir)
		return d
	}
	if !dc.FS.IsDir(dir) {
		return d
	}
	for _, at := range slices.Compact([]string{dir, dc.FS.RealPath(dir)}) {
		by, id, ask := p.Eff.TreeWithheld(p.Name, at)
		if by == nil || ask && d.Ask {
			continue
		}
		shown, text := allow.Named(by, ", ")
		d.Allowed, d.Ask, d.Rule, d.Entries = false, ask, id, shown
		verdict := "is refused"
		if ask {
			verdict = "needs approval"
		}
		d.Reason = fmt.Sprintf("%s of %q %s: %s searches everything below it, and on this surface some of that is withheld by %s; give as path a directory below it that holds none of that, or a file.", p.Name, at, verdict, runtimeName(p.Tool.External), text)
		return d
	}
	return d
}

// runtimeName is how a sentence names the program that runs a tool of
// external.
func runtimeName(external string) string {
	switch external {
	case "gemini-cli":
		return "Gemini CLI"
	case "codex":
		return "Codex"
	}
	return "Claude Code"
}

// leavesDir reports whether a glob pattern may name a path outside the
// directory it is matched in: an absolute alternative or a '..' segment,
// braces read on the safe side.
func leavesDir(pattern string) bool {
	if strings.HasPrefix(pattern, "/") || strings.Contains(pattern, "{/") || strings.Contains(pattern, ",/") {
		return true
	}
	return slices.Contains(strings.FieldsFunc(pattern, func(r rune) bool { return strings.ContainsRune("/{},", r) }), "..")
}

// Scope is what an allowed call of a path tool may touch (rule R6): the
// deepest literal directory of the entries that allowed it, where its opens
// are anchored, and the same patterns for the files a search visits. Nil
// for a tool without a path subject.
func Scope(p *Prepared, d rule.Decision, workdir string) *tools.Scope {
	s := p.Tool.Subject
	if s == nil || s.Kind != "path" {
		return nil
	}
	anchor := "/"
	for _, raw := range d.Entries {
		e, err := allow.ParseEntry(raw)
		if err != nil || !e.HasPattern {
			continue
		}
		dir := allow.LiteralDir(e.Pattern)
		if dir == path.Clean(e.Pattern) && dir != "/" {
			dir = path.Dir(dir) // a pattern without a glob names a file: anchor at its directory
		}
		if len(dir) > len(anchor) {
			anchor = dir
		}
	}
	if anchor == "/" && p.Eff.Unlimited() {
		return &tools.Scope{Anchor: "/"}
	}
	eff, name, field, wd := p.Eff, p.Name, s.Field, workdir
	return &tools.Scope{Anchor: anchor, Allows: func(path string) bool {
		return eff.Decide(name, map[string]any{field: path}, wd).Allowed
	}, Reaches: func(dir string) bool {
		return eff.MayAllowBelow(name, dir)
	}}
}

// Sandbox derives the sandbox of one call of t from the policy (rule R6):
// writable are the literal directory prefixes of the call's effective
// entries for the tools that write files (the built-ins Write and Edit,
// whatever the policy names them), and the tool's own sandbox.write; what
// the gateway reads or runs stays read-only (protect, rule R8); what the
// readers' deny and ask entries withhold is hidden (P14).
func (dc *Decider) Sandbox(cur *policy.Generation, eff *allow.Effective, t *policy.Tool) *tools.Sandbox {
	spec := t.Sandbox
	sb := &tools.Sandbox{Off: spec.Off, Network: spec.Network, Hosts: spec.Hosts, Env: slices.Clone(spec.Env), Executable: slices.Clone(spec.Exec), Log: dc.Log}
	var withheld []string // where the writers' deny and ask entries reach
	var unread []string   // where the readers' do
	for _, name := range cur.Sorted() {
		wt := cur.Tools[name]
		if !wt.WritesFiles() {
			if wt.Subject != nil && wt.Subject.Kind == "path" {
				unread = append(unread, eff.Withheld(name)...)
			}
			continue
		}
		if !eff.Listed(name) {
			continue
		}
		dirs, all := eff.Prefixes(name)
		if all {
			dirs = []string{"/"}
		}
		sb.Writable = append(sb.Writable, dirs...)
		withheld = append(withheld, eff.Withheld(name)...)
	}
	for _, w := range spec.Write {
		sb.Writable = append(sb.Writable, dc.home(w))
	}
	// What a deny or ask entry of a writer withholds, a command does not
	// write either (rule P14): a writable directory it covers whole is
	// dropped, and the rest is bound read-only inside the writable ones,
	// at the nearest path that exists (a file not yet made cannot be bound).
	sb.Writable = slices.DeleteFunc(sb.Writable, func(w string) bool {
		return slices.ContainsFunc(withheld, func(d string) bool { return w == d || strings.HasPrefix(w, strings.TrimSuffix(d, "/")+"/") })
	})
	for _, d := range withheld {
		if d = dc.FS.Existing(d); d == "/" {
			sb.Writable = nil // withheld everywhere: nothing is writable
			continue
		}
		sb.ReadOnly = append(sb.ReadOnly, d)
	}
	slices.Sort(sb.Writable)
	sb.Writable = slices.Compact(sb.Writable)
	if sb.Writable == nil {
		sb.Writable = []string{}
	}
	// Where it writes itself it executes nothing already.
	sb.NoExec = slices.DeleteFunc(dc.writtenElsewhere(cur), func(d string) bool {
		return slices.ContainsFunc(sb.Writable, func(w string) bool { return w == "/" || d == w || strings.HasPrefix(d, strings.TrimSuffix(w, "/")+"/") })
	})
	for _, h := range spec.Hide {
		sb.Hidden = append(sb.Hidden, dc.home(h))
	}
	// What a deny or ask entry of a tool that reads files (Read, Grep,
	// Glob) withholds, a command does not read either (rules P14, P17): it
	// is hidden. Not a pattern without a literal directory ("/", or
	// relative), nor the working directory or one above it, in which a
	// command runs: hideFiles hides what such entries name file by file.
	for _, d := range unread {
		if mountable(d, dc.Workdir) && !slices.Contains(sb.Hidden, d) {
			sb.Hidden = append(sb.Hidden, d) // Read's entries bind Grep and Glob too: once
		}
	}
	return sb
}

// writtenElsewhere is where any call of the policy may write files: the
// literal directories of every surface's entries for the tools that write
// files, an MCP server's or a plugin's path tools that write among them
// (the working directory for a surface that may write anywhere),
// and every tool's sandbox.write. A command executes nothing there, though
// it may not write there itself (rule P16; probe P10): what the agent
// wrote stays on disk when a narrower surface, or a session a flow has
// narrowed, runs a command.
func (dc *Decider) writtenElsewhere(cur *policy.Generation) []string {
	var out []string
	add := func(d string) {
		if d == "" {
			return
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dc.Workdir, d)
		}
		if d = filepath.Clean(d); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, ref := range cur.SortedSurfaces() {
		eff, err := cur.Effective([]string{ref})
		if err != nil {
			continue
		}
		for _, name := range cur.Sorted() {
			t := cur.Tools[name]
			writer := t.WritesFiles() || t.OpensItself() && t.Writes() && t.Subject != nil && t.Subject.Kind == "path"
			if !writer || !eff.Listed(name) {
				continue
			}
			dirs, all := eff.Prefixes(name)
			if all {
				dirs = []string{dc.Workdir}
			}
			for _, d := range dirs {
				add(d)
			}
		}
	}
	for _, name := range cur.Sorted() {
		if sb := cur.Tools[name].Sandbox; sb != nil {
			for _, w := range sb.Write {
				add(dc.home(w))
			}
		}
	}
	return out
}

// mountable reports whether the directory d that a reader's entry
// withholds can be hidden whole: a literal directory other than "/", the
// working directory and those above it.
func mountable(d, wd string) bool { return policy.Hideable(d, wd) }

// hideFiles hides, file by file, what the readers' deny and ask entries
// name where no mount of their literal directory can (rule P17): a pattern
// without one (Read(**/.env)) is looked for under the working directory,
// one whose directory holds the working directory under that directory.
// Only files that exist when the command starts are found (vet says so).
// It returns a refusal when there are too many entries to look through.
func (dc *Decider) hideFiles(cur *policy.Generation, eff *allow.Effective, sb *tools.Sandbox) string {
	wd := dc.Workdir
	var readers, roots []string
	for _, name := range cur.Sorted() {
		t := cur.Tools[name]
		if t.WritesFiles() || t.Subject == nil || t.Subject.Kind != "path" {
			continue
		}
		for _, d := range eff.Withheld(name) {
			if mountable(d, wd) {
				continue
			}
			if !slices.Contains(readers, name) {
				readers = append(readers, name)
			}
			if d == "/" || !filepath.IsAbs(d) {
				d = wd
			}
			if d != "" && !slices.Contains(roots, d) {
				roots = append(roots, d)
			}
		}
	}
	seen, bound := 0, dc.MaxHideWalk
	if bound <= 0 {
		bound = 200_000
	}
	for _, root := range roots {
		err := dc.FS.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if seen++; seen > bound {
				return errTooMany
			}
			if err != nil || p == root {
				return nil // what cannot be read is not read by a command either
			}
			if slices.ContainsFunc(readers, func(r string) bool { return eff.Withholds(r, p, wd) }) {
				sb.Hidden = append(sb.Hidden, p)
				if de.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
		if errors.Is(err, errTooMany) {
			return fmt.Sprintf("the command was not run: a deny or ask entry of %s names files by a pattern without a directory of their own, and %s holds more than %d entries to look through for them (rule P17); give the entry a literal directory (Read(/srv/secret/**)), or list the files in the tool's sandbox.hide", strings.Join(readers, ", "), root, bound)
		}
	}
	return ""
}

// home expands a leading ~/ to the user's home directory.
func (dc *Decider) home(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h := dc.FS.Home(); h != "" {
			return filepath.Join(h, rest)
		}
	}
	return p
}

var errTooMany = errors.New("too many entries")
