// Package replay re-decides a decision log under a candidate policy
// (aimon-gw replay, rule P18): every session the log recorded with its
// calls (--decision-log-calls) is replayed in order, its state included —
// the labels its results give under the candidate, the user's words and,
// when the log holds them, the results' texts — and each call whose
// verdict the candidate changes is reported. Nothing runs.
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
)

// Verdicts, as a change names them.
const (
	Allowed = "allowed"
	Refused = "refused"
	Asked   = "asked"
)

// verdict is the class of a decision: a call that needed approval is asked,
// whatever the person then said.
func verdict(allowed, ask bool) string {
	switch {
	case ask:
		return Asked
	case allowed:
		return Allowed
	}
	return Refused
}

// A Change is a recorded call whose verdict the candidate changes.
type Change struct {
	Line          int // of the call's record in the log
	Session, Call string
	Tool          string
	Subject       any
	Was, Now      string
	Rule          rule.ID
	Reason        string
}

// A Report is what a replay found.
type Report struct {
	Calls, Sessions int
	Changes         []Change
	// Skipped are the records that carry no call (written without
	// --decision-log-calls): they cannot be re-decided.
	Skipped int
	// Blind are the calls the candidate refused by provenance in a
	// session whose texts the log does not hold (digests only): not
	// reported as changes, since the texts could have held the value.
	Blind int
}

// Options are a replay's.
type Options struct {
	// Policy is the candidate policy's directory.
	Policy      string
	LoadTimeout time.Duration
	// Name names the log in sentences (its path).
	Name string
}

// maxRecord bounds one record: a result's text may be recorded whole.
const maxRecord = 64 << 20

// Run replays the log read from r under the candidate policy. An error is
// a log or a policy that cannot be read: a torn record, a record of an
// unknown version, a line that is not a record.
func Run(ctx context.Context, r io.Reader, o Options) (*Report, error) {
	rp := &replayer{o: o, ctx: ctx, gws: map[string]*gateway.Gateway{}, sessions: map[string]*recorded{}, log: slog.New(slog.DiscardHandler)}
	defer rp.close()
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		data, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			data, err = readLong(br, data)
		}
		if err == io.EOF {
			if len(strings.TrimSpace(string(data))) > 0 {
				return nil, fmt.Errorf("%s:%d: the last record is cut short (no newline ends it), so the log was torn, or copied while it was written; replay a whole log, or remove that line", o.Name, line)
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", o.Name, line, err)
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		var rec decisionlog.Record
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: the line is not a decision record (%v); give aimon-gw replay a log that --decision-log wrote", o.Name, line, err)
		}
		if err := rp.record(line, rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", o.Name, line, err)
		}
	}
	if rp.rep.Calls == 0 {
		if rp.rep.Skipped > 0 {
			return nil, fmt.Errorf("none of the %d records of %s carries its call (they were written without --decision-log-calls), so there is nothing to replay; record with aimon-gw serve --decision-log FILE --decision-log-calls", rp.rep.Skipped, o.Name)
		}
		return nil, fmt.Errorf("%s holds no record, so there is nothing to replay", o.Name)
	}
	rp.rep.Sessions = len(rp.sessions)
	return &rp.rep, nil
}

// readLong reads the rest of a line longer than the reader's buffer.
func readLong(br *bufio.Reader, first []byte) ([]byte, error) {
	data := append([]byte(nil), first...)
	for {
		more, err := br.ReadSlice('\n')
		data = append(data, more...)
		if len(data) > maxRecord {
			return nil, fmt.Errorf("a record is longer than %d MiB, which no decision log writes", maxRecord>>20)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return data, err
		}
	}
}

type replayer struct {
	o        Options
	ctx      context.Context
	log      *slog.Logger
	gws      map[string]*gateway.Gateway // by working directory
	closers  []func()
	sessions map[string]*recorded
	rep      Report
}

// recorded is one recorded session as the replay has it.
type recorded struct {
	state gateway.Session
	calls map[string]gateway.Call // by call id, for their results
	// blind: the log holds its results' digests, not their texts.
	blind bool
	// workdir is its working directory, which its calls' records name
	// (a result's record does not).
	workdir string
}

func (rp *replayer) close() {
	for _, c := range rp.closers {
		c()
	}
}

// gateway is the candidate's gateway for workdir, loaded once: "./"
// patterns resolve against the working directory at load.
func (rp *replayer) gateway(workdir string) (*gateway.Gateway, error) {
	if g := rp.gws[workdir]; g != nil {
		return g, nil
	}
	wd := workdir
	if wd == "" {
		wd = "/"
	}
	gen, closeGen, err := reload.Once(rp.ctx, rp.o.Policy, wd, rp.o.LoadTimeout, rp.log)
	if err != nil {
		return nil, fmt.Errorf("the candidate policy in %s does not load (for the working directory %s):\n%v", rp.o.Policy, wd, err)
	}
	rp.closers = append(rp.closers, closeGen)
	g := gateway.New(gen, gateway.Options{Workdir: workdir, Logger: rp.log, ClientAsks: true, Protected: true})
	rp.gws[workdir] = g
	return g, nil
}

// session is the replayed state of the recorded session id; a record of
// no session (a caller with none) replays in a session of its own.
func (rp *replayer) session(id string, line int) *recorded {
	if id == "" {
		id = fmt.Sprintf("\x00line %d", line)
	}
	s := rp.sessions[id]
	if s == nil {
		s = &recorded{state: gateway.NewSession(), calls: map[string]gateway.Call{}}
		rp.sessions[id] = s
	}
	return s
}

// record replays one record.
func (rp *replayer) record(line int, rec decisionlog.Record) error {
	switch {
	case rec.V > decisionlog.Version:
		return fmt.Errorf("the record is of version %d, which this aimon-gw does not read (it reads version %d); replay the log with the aimon-gw that wrote it, or a newer one", rec.V, decisionlog.Version)
	case rec.V == 0:
		rp.rep.Skipped++
		return nil
	}
	s := rp.session(rec.Session, line)
	if rec.Workdir != "" {
		s.workdir = rec.Workdir
	}
	if rec.TextSHA256 != "" && rec.Text == nil {
		s.blind = true
	}
	switch rec.Phase {
	case decisionlog.User:
		if rec.Text != nil {
			gateway.NoteUser(s.state, *rec.Text)
		}
		return nil
	case decisionlog.Result:
		c, ok := s.calls[rec.CallID]
		if !ok {
			return nil
		}
		// An error labels too: the call ran, and read what it could
		// (rule P18; probe V6).
		text := ""
		if rec.Text != nil {
			text = *rec.Text
		}
		g, err := rp.gateway(s.workdir)
		if err != nil {
			return err
		}
		c.Session = s.state
		_, err = g.Label(rp.ctx, rec.Surface, c, text)
		return err
	case decisionlog.Running, decisionlog.Decided:
	default:
		return nil // programs and approvals decide nothing again
	}
	g, err := rp.gateway(s.workdir)
	if err != nil {
		return err
	}
	in := rec.Input
	if in == nil {
		in = map[string]any{}
	}
	input, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("the record's input cannot be encoded again: %v", err)
	}
	c := gateway.Call{ID: rec.CallID, Name: rec.Tool, Input: input, Principal: rec.Principal, Session: s.state}
	s.calls[rec.CallID] = c
	rp.rep.Calls++
	_, d := g.Decide(rec.Surface, c)
	if rec.Phase == decisionlog.Decided && rec.Allowed {
		// A call a hook allowed, which its runtime ran: it labelled the
		// session at its decision, and its result may never have come
		// back (a failure, rule P18).
		if _, err := g.Label(rp.ctx, rec.Surface, c, ""); err != nil {
			return err
		}
	}
	was, now := verdict(rec.Allowed, rec.Ask), verdict(d.Allowed, d.Ask)
	if was == now {
		return nil
	}
	if s.blind && d.Rule == rule.P18 && strings.Contains(d.Reason, "(the policy's provenance of ") {
		rp.rep.Blind++
		return nil
	}
	rp.rep.Changes = append(rp.rep.Changes, Change{Line: line, Session: rec.Session, Call: rec.CallID, Tool: rec.Tool, Subject: rec.Subject, Was: was, Now: now, Rule: d.Rule, Reason: d.Reason})
	return nil
}

// Print writes the report: one line a change, at its place in the log,
// then what the replay did and a count of each kind of change.
func (r *Report) Print(w io.Writer, o Options) error {
	var b strings.Builder
	counts := map[string]int{}
	var kinds []string
	for _, c := range r.Changes {
		call := c.Tool
		if c.Subject != nil {
			call = fmt.Sprintf("%s(%v)", c.Tool, c.Subject)
		}
		kind := c.Was + " → " + c.Now
		if counts[kind] == 0 {
			kinds = append(kinds, kind)
		}
		counts[kind]++
		fmt.Fprintf(&b, "%s:%d: session %s call %s %s: %s", o.Name, c.Line, c.Session, c.Call, call, kind)
		if c.Now != Allowed {
			fmt.Fprintf(&b, " by %s: %s", c.Rule, c.Reason)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "replayed %s in %s under %s: ", plural(r.Calls, "call"), plural(r.Sessions, "session"), o.Policy)
	if len(r.Changes) == 0 {
		b.WriteString("no verdict changes")
	} else {
		if len(r.Changes) == 1 {
			b.WriteString("1 call changes")
		} else {
			fmt.Fprintf(&b, "%d calls change", len(r.Changes))
		}
		for i, k := range kinds {
			sep := ", "
			if i == 0 {
				sep = " ("
			}
			fmt.Fprintf(&b, "%s%d %s", sep, counts[k], k)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	if r.Skipped > 0 {
		fmt.Fprintf(&b, "%d records carry no call (written without --decision-log-calls) and were not replayed\n", r.Skipped)
	}
	if r.Blind > 0 {
		fmt.Fprintf(&b, "%d calls the candidate refuses by provenance were not counted: the log holds the results' digests, not their texts (record with --decision-log-content)\n", r.Blind)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plural is n things, "1 call" or "2 calls".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
