package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// sandbox derives the sandbox of one call of t from the policy (rule R6):
// writable are the literal directory prefixes of the call's effective
// entries for the tools that write files (the built-ins Write and Edit,
// whatever the policy names them), and the tool's own sandbox.write; what
// the gateway reads or runs stays read-only (protect, rule R8); what the
// readers' deny and ask entries withhold is hidden (P14).
func (g *Gateway) sandbox(cur *provision.Generation, eff *allow.Effective, t *policy.Tool) *tools.Sandbox {
	spec := t.Sandbox
	sb := &tools.Sandbox{Off: spec.Off, Network: spec.Network, Hosts: spec.Hosts, Env: slices.Clone(spec.Env), Executable: slices.Clone(spec.Exec), Log: g.log}
	var withheld []string // where the writers' deny and ask entries reach
	var unread []string   // where the readers' do
	for _, name := range cur.Names() {
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
		sb.Writable = append(sb.Writable, home(w))
	}
	// What a deny or ask entry of a writer withholds, a command does not
	// write either (rule P14): a writable directory it covers whole is
	// dropped, and the rest is bound read-only inside the writable ones,
	// at the nearest path that exists (a file not yet made cannot be bound).
	sb.Writable = slices.DeleteFunc(sb.Writable, func(w string) bool {
		return slices.ContainsFunc(withheld, func(d string) bool { return w == d || strings.HasPrefix(w, strings.TrimSuffix(d, "/")+"/") })
	})
	for _, d := range withheld {
		if d = existing(d); d == "/" {
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
	for _, h := range spec.Hide {
		sb.Hidden = append(sb.Hidden, home(h))
	}
	// What a deny or ask entry of a tool that reads files (Read, Grep,
	// Glob) withholds, a command does not read either (rules P14, P17): it
	// is hidden. Not a pattern without a literal directory ("/", or
	// relative), nor the working directory or one above it, in which a
	// command runs: hideFiles hides what such entries name file by file.
	for _, d := range unread {
		if mountable(d, g.opts.Workdir) && !slices.Contains(sb.Hidden, d) {
			sb.Hidden = append(sb.Hidden, d) // Read's entries bind Grep and Glob too: once
		}
	}
	return sb
}

// mountable reports whether the directory d that a reader's entry
// withholds can be hidden whole: a literal directory other than "/", the
// working directory and those above it.
func mountable(d, wd string) bool {
	return d != "/" && filepath.IsAbs(d) && wd != d && !strings.HasPrefix(wd, d+"/")
}

// maxHideWalk bounds the entries hideFiles visits for one command.
var maxHideWalk = 200_000 // a variable for its test

// hideFiles hides, file by file, what the readers' deny and ask entries
// name where no mount of their literal directory can (rule P17): a pattern
// without one (Read(**/.env)) is looked for under the working directory,
// one whose directory holds the working directory under that directory.
// Only files that exist when the command starts are found (vet says so).
// It returns a refusal when there are too many entries to look through.
func (g *Gateway) hideFiles(cur *provision.Generation, eff *allow.Effective, sb *tools.Sandbox) string {
	wd := g.opts.Workdir
	var readers, roots []string
	for _, name := range cur.Names() {
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
	seen := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if seen++; seen > maxHideWalk {
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
			return fmt.Sprintf("the command was not run: a deny or ask entry of %s names files by a pattern without a directory of their own, and %s holds more than %d entries to look through for them (rule P17); give the entry a literal directory (Read(/srv/secret/**)), or list the files in the tool's sandbox.hide", strings.Join(readers, ", "), root, maxHideWalk)
		}
	}
	return ""
}

var errTooMany = errors.New("too many entries")

// existing is p, or its nearest ancestor that exists.
func existing(p string) string {
	for ; p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			return p
		}
	}
	return p
}

// home expands a leading ~/ to the gateway's home directory.
func home(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}

// scope is what an allowed call of a path tool may touch (rule R6): the
// deepest literal directory of the entries that allowed it, where its opens
// are anchored, and the same patterns for the files a search visits. Nil
// for a tool without a path subject.
func (g *Gateway) scope(p prepared, d rule.Decision) *tools.Scope {
	s := p.tool.Subject
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
	if anchor == "/" && p.eff.Unlimited() {
		return &tools.Scope{Anchor: "/"}
	}
	eff, name, field, wd := p.eff, p.Name, s.Field, g.opts.Workdir
	return &tools.Scope{Anchor: anchor, Allows: func(path string) bool {
		return eff.Decide(name, map[string]any{field: path}, wd).Allowed
	}, Reaches: func(dir string) bool {
		return eff.MayAllowBelow(name, dir)
	}}
}

// landing judges a path subject by the deny and ask entries where it
// really leads too (rule P14): a link the agent made, or the kernel's
// /proc/self/root, takes no client that opens the path itself (Claude Code
// under the hook) into what they withhold. The allow lists judge the path
// as written only, so that an operator's link above an allowed directory
// changes nothing; the built-ins' anchors hold them again when they run.
func (g *Gateway) landing(p prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.tool.Subject
	if s == nil || s.Kind != "path" || len(p.eff.Withheld(p.Name)) == 0 {
		return d
	}
	at, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	real := sandbox.LandsAt(at) // a dangling link where it points: Claude Code writes there
	if real == filepath.Clean(at) {
		return d
	}
	there := maps.Clone(in)
	there[s.Field] = real
	r := p.eff.Decide(p.Name, there, g.opts.Workdir)
	if r.Rule != rule.P14 || r.Allowed || r.Ask && d.Ask {
		return d
	}
	d.Allowed, d.Ask, d.Rule, d.Entries = false, r.Ask, rule.P14, r.Entries
	d.Reason = fmt.Sprintf("%s path %q leads through a symbolic link to %q, and there: %s", p.Name, at, real, r.Reason)
	return d
}

// leading judges an allowed path subject by the allow lists where it
// really leads, when the client opens the path itself (Claude Code under
// the hook), as the built-ins' anchors hold them (rule R6): a link the
// agent made inside an allowed directory takes no call out of what the
// lists allow. A link above the allowing entry's directory (an operator's
// /home leading to /data/home) moves the directory with it: a path that
// lands within that directory, resolved, stays allowed.
func (g *Gateway) leading(p prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.tool.Subject
	if g.opts.ClientTools == "" || s == nil || s.Kind != "path" || !(d.Allowed || d.Ask) {
		return d
	}
	at, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	real := sandbox.LandsAt(at)
	if real == filepath.Clean(at) {
		return d
	}
	there := maps.Clone(in)
	there[s.Field] = real
	if r := p.eff.Decide(p.Name, there, g.opts.Workdir); r.Allowed || r.Ask {
		return d
	}
	anchor := g.scope(p, d).Anchor
	if base := sandbox.RealPath(anchor); anchor != "/" && (real == base || strings.HasPrefix(real, base+"/")) {
		return d
	}
	_, text := allow.Named(d.Entries, " and ")
	if text == "" {
		text = "the list"
	}
	return rule.Refused(rule.R6, fmt.Sprintf("%s path %q leads through a symbolic link to %q, which %s does not allow; Claude Code would open it there. Give the path where the file really is, inside what the list allows.", p.Name, at, real, text))
}

// guard refuses a call that writes where the gateway reads or runs (rule
// R8), whatever the lists allow: under the hook, Claude Code's own Write
// and Edit write what was only decided here. The protected paths are
// those of New and Swap; the call costs the resolution of its path.
func guard(t *policy.Tool, in tools.Input, d rule.Decision) rule.Decision {
	if !writesPath(t) || !(d.Allowed || d.Ask) {
		return d
	}
	at, ok := in[t.Subject.Field].(string)
	if !ok {
		return d // no path, nothing written: the gate's and P5's to refuse
	}
	g := sandbox.Guarding(at)
	if why := g.Refusal(); why != "" {
		id := rule.R8
		if g.Gate {
			id = rule.R9
		}
		return rule.Refused(id, fmt.Sprintf("%s was not run: %s.", t.Name, why))
	}
	return d
}

// writesPath reports whether a call of t writes the path its subject
// names: the file tools, and any path tool the policy says writes.
func writesPath(t *policy.Tool) bool {
	s := t.Subject
	return s != nil && s.Kind == "path" && (t.WritesFiles() || t.Effect == "write" || t.Effect == "destructive")
}

// protectGateway protects what the gateway itself reads or runs (rule
// R8): its own binary, its decision log, and the hook's default cache of
// compiled policies, created if need be before the first sandbox so that
// no command can create it first.
func protectGateway(opts Options) {
	if exe, err := os.Executable(); err == nil {
		sandbox.Protect("the gateway's own program", exe)
	}
	if l, ok := opts.Decisions.(interface{ Path() string }); ok {
		sandbox.Protect(sandbox.WhatLog, l.Path())
	}
	if dir, err := loadcache.DefaultDir(); err == nil {
		sandbox.ProtectDir(sandbox.WhatCache, dir)
	}
}

// protect protects what a generation reads or runs (rule R8): its whole
// CUE module (CUE reads a package's files up to the module root), its
// surfaces sources and every file it read, and the executables of its
// plugins and upstream servers, found as they will be started, with the
// scripts their arguments name.
func protect(gen *provision.Generation) {
	if gen.Dir != "" {
		sandbox.Protect("the policy's directory (its .cue files and pins.cue)", gen.Dir)
		sandbox.Protect("the policy's CUE module, whose files the policy loads", policy.ModuleRoot(gen.Dir))
	}
	sandbox.Protect("a surfaces source the policy reads", gen.Dirs...)
	sandbox.Protect("a file the policy is loaded from", gen.Inputs...)
	var ps []string
	ts := slices.Collect(maps.Values(gen.Tools))
	ts = append(ts, slices.Collect(maps.Values(gen.Wildcards))...)
	for _, t := range ts {
		switch {
		case t.Plugin != nil && len(t.Plugin.Command) > 0:
			ps = append(ps, sandbox.Executable(t.Plugin.Command[0], t.PolicyDir))
			ps = append(ps, provision.Scripts(t.Plugin.Command[1:], "")...)
		case t.Upstream != nil && len(t.Upstream.Command) > 0:
			ps = append(ps, sandbox.Executable(t.Upstream.Command[0], t.Upstream.Cwd))
			ps = append(ps, provision.Scripts(t.Upstream.Command[1:], t.Upstream.Cwd)...)
		}
	}
	sandbox.Protect("a program the gateway starts (a plugin or MCP server, or a script it runs)", ps...)
}

// execJudge judges each program a sandboxed command of p starts by the
// call's deny and ask entries (rule P16); approved says a person approved
// the call, whose simple commands an ask entry then lets run.
func (g *Gateway) execJudge(p prepared, in map[string]any, approved bool) *tools.ExecJudge {
	command, _ := in["command"].(string)
	if command == "" {
		return nil
	}
	name, eff, wd := p.Name, p.eff, g.opts.Workdir
	j := &tools.ExecJudge{
		Names: eff.ExecNames(name),
		Decide: func(words []string) (string, bool) {
			d := eff.ExecDecide(name, words, wd)
			if d.Allowed {
				return "", false
			}
			return d.Reason, d.Ask
		},
		Refused: func(words []string, program string, argv []string, reason string) {
			g.log.Warn("program refused in the sandbox", "tool", name, "id", p.ID, "program", program, "argv", argv, "rule", "P16", "reason", reason)
			g.recordProgram(p, command, words, program, argv, reason)
		},
	}
	if approved {
		j.Approved = allow.SimpleCommands(command)
	}
	return j
}

// recordProgram records in the decision log a program the command of
// call p started and the sandbox refused (rule P16), before the tracer
// kills it: the entries that refused it (none when the tracer could not
// read it), the file it is and its argument vector, under the call's id.
// A record that cannot be written stops every later call, as any other.
func (g *Gateway) recordProgram(p prepared, command string, words []string, program string, argv []string, reason string) {
	log := g.opts.Decisions
	if log == nil {
		log = g.opts.Programs
	}
	if log == nil {
		return
	}
	d := p.eff.ExecDecide(p.Name, words, g.opts.Workdir)
	rec := decisionlog.Record{Time: time.Now().UTC(), Phase: decisionlog.Program, CallID: p.ID, Tool: p.Name, Surface: p.chain,
		Principal: p.principal, Subject: command, Rule: rule.P16, Entries: d.Entries, Revision: p.cur.Revision, Commit: p.cur.Commit(),
		Generation: p.cur.Number, Reason: reason, Program: program, Argv: argv}
	if rec.Principal == "" {
		rec.Principal = g.opts.Principal
	}
	g.unrecorded(log.Log(rec))
}
