package gateway

import (
	"context"
	"fmt"
	"maps"
	"os"
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

// protectGateway protects what the gateway itself reads or runs (rule
// R8): its own binary and its sandbox program beside it, its decision log, and the hook's default cache of
// compiled policies, created if need be before the first sandbox so that
// no command can create it first.
func protectGateway(opts Options) {
	if exe, err := os.Executable(); err == nil {
		sandbox.ProtectPrograms(exe)
	}
	// And the path the runtime started it by, links and all (rule R9).
	sandbox.Protect(sandbox.WhatStartedAs, sandbox.StartedAs())
	// And, started by a bare name, where PATH would find another first.
	sandbox.ProtectShadows(sandbox.StartedAs(), sandbox.Shadows()...)
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
// call's deny and ask entries, with its session's flows (rules P16, P18); approved says a person approved
// the call, whose simple commands an ask entry then lets run.
func (g *Gateway) execJudge(p prepared, in map[string]any, approved bool) *tools.ExecJudge {
	command, _ := in["command"].(string)
	if command == "" {
		return nil
	}
	name, eff, wd := p.Name, p.Programs(), p.Workdir
	names := eff.ExecNames(name)
	// The programs a label's entry on the command names label the
	// session as they start (rule P18 read with P16).
	var labelled []string
	if p.Session != nil {
		labelled = p.Gen.ProgramLabelNames(name)
	}
	if len(labelled) > 0 {
		names = slices.Compact(slices.Sorted(slices.Values(slices.Concat(names, labelled))))
	}
	// An approved push runs with what git starts to carry it.
	carrying := approved && allow.Pushes(command)
	j := &tools.ExecJudge{
		Names: names,
		Decide: func(words []string) (string, bool) {
			if len(labelled) > 0 {
				if why := g.labelProgram(p, command, words); why != "" {
					return why, false
				}
			}
			d := eff.ExecDecideCarrying(name, words, wd, carrying)
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

// labelProgram gives the session of call p the labels that a program its
// command started, words, gives (rule P18); "" when the program may go on,
// else why not: a label that cannot be kept stops it, as a label a call
// cannot keep refuses the call (labelAhead).
func (g *Gateway) labelProgram(p prepared, command string, words []string) string {
	labels := p.Gen.ProgramLabels(p.Name, words, p.Workdir)
	if len(labels) == 0 {
		return ""
	}
	from := Source{Tool: p.Name, ID: p.ID, Subject: fmt.Sprintf("%s, whose program %s it started,", command, allow.QuoteWords(words))}
	if err := p.Session.Gain(context.Background(), labels, from); err != nil {
		return fmt.Sprintf("%s program %s was not run: it labels the session %s, and the label cannot be kept (%v); try again once the state store answers.", p.Name, allow.QuoteWords(words), strings.Join(labels, ", "), strings.TrimSuffix(err.Error(), "."))
	}
	g.log.Info("session labelled by a program", "labels", strings.Join(labels, ","), "tool", p.Name, "id", p.ID, "program", words[0])
	return ""
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
	d := p.Programs().ExecDecide(p.Name, words, p.Workdir)
	rec := decisionlog.Record{Time: time.Now().UTC(), Phase: decisionlog.Program, CallID: p.ID, Tool: p.Name, Surface: p.Chain,
		Principal: p.Principal, Subject: command, Rule: rule.P16, Entries: d.Entries, Revision: p.cur.Revision, Commit: p.cur.Commit(),
		Generation: p.cur.Number, Reason: reason, Program: program, Argv: argv}
	if rec.Principal == "" {
		rec.Principal = g.opts.Principal
	}
	g.unrecorded(log.Log(rec))
}
