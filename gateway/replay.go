package gateway

import (
	"context"
	"io"
	"time"

	"aimon.dev/gw/internal/front/replay"
)

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Name names the log in sentences and in the report (LOG:LINE: ...),
	// as its path; "" for none.
	Name string
	// LoadTimeout bounds each load of the candidate policy; 0 for none.
	LoadTimeout time.Duration
}

// A ReplayChange is a recorded call whose verdict the candidate policy
// changes.
type ReplayChange struct {
	// Line is the line of the call's record in the log; Session and Call
	// its session's and its own id as recorded.
	Line          int
	Session, Call string
	// Tool is the tool called, Subject what it acted on (a path, a
	// command) when the record names one.
	Tool    string
	Subject any
	// Was is the verdict recorded, Now the candidate's: "allowed",
	// "refused" or "asked" (a call that needed a person's approval,
	// whatever the person said). Rule and Reason are the candidate's
	// decision.
	Was, Now     string
	Rule, Reason string
}

// A ReplayReport is what a replay found.
type ReplayReport struct {
	// Calls and Sessions are how many were replayed.
	Calls, Sessions int
	// Changes are the calls whose verdict the candidate changes, in the
	// log's order.
	Changes []ReplayChange
	// Skipped are the records that carry no call (written without
	// --decision-log-calls): they cannot be re-decided.
	Skipped int
	// Blind are the calls the candidate refuses by provenance in a
	// session whose log holds the results' digests, not their texts: not
	// changes, since the texts could have held the value.
	Blind int

	rep *replay.Report
	o   replay.Options
}

// Replay re-decides every session a decision log recorded with its calls
// (aimon-gw serve --decision-log FILE --decision-log-calls) under the
// candidate policy in the directory candidate, as aimon-gw replay does
// (rule P18): each session in order, its state included (the labels its
// results give under the candidate, the user's words and, when the log
// holds them, the results' texts), and reports each call whose verdict
// the candidate changes. Nothing runs. The candidate is loaded for each
// working directory the log names, so that its "./" patterns resolve as
// they would have. An error is a log or a candidate that cannot be read,
// placed at its line: a torn record, a record of an unknown version, a
// line that is not a record, a log of no call.
func Replay(ctx context.Context, log io.Reader, candidate string, o ReplayOptions) (*ReplayReport, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ro := replay.Options{Policy: candidate, LoadTimeout: o.LoadTimeout, Name: o.Name}
	rep, err := replay.Run(ctx, log, ro)
	if err != nil {
		return nil, err
	}
	out := &ReplayReport{Calls: rep.Calls, Sessions: rep.Sessions, Skipped: rep.Skipped, Blind: rep.Blind, rep: rep, o: ro}
	for _, c := range rep.Changes {
		out.Changes = append(out.Changes, ReplayChange{Line: c.Line, Session: c.Session, Call: c.Call, Tool: c.Tool, Subject: c.Subject,
			Was: c.Was, Now: c.Now, Rule: string(c.Rule), Reason: c.Reason})
	}
	return out, nil
}

// Print writes the report as aimon-gw replay prints it: one line a
// change, at its place in the log (LOG:LINE: session S call C TOOL(SUBJECT):
// WAS → NOW by RULE: REASON), then what the replay did and a count of each
// kind of change.
func (r *ReplayReport) Print(w io.Writer) error { return r.rep.Print(w, r.o) }
