package gateway

import "aimon.dev/gw/internal/runtime/decisionlog"

// A DecisionLog is a file every decided call is appended to as a JSON line
// before its tool runs, and its result after, as aimon-gw --decision-log
// writes it (rule R10); Options.Decisions gives it to a gateway. While it
// cannot be written, no call is allowed. Its methods are safe for
// concurrent use, and a nil *DecisionLog is none.
type DecisionLog struct{ f *decisionlog.File }

// DecisionLogOptions say what a DecisionLog records beside each decision.
type DecisionLogOptions struct {
	// Calls records each call's canonical input and session, and each
	// result's labels and sha256, so that aimon-gw replay can decide the
	// log again under another policy (never a result's content), as
	// --decision-log-calls. Content records the results' texts and the
	// user's words too, as --decision-log-content: they may hold secrets.
	Calls, Content bool
	// Sync flushes each record to the disk before going on, so that it
	// survives a power loss (--decision-log-sync).
	Sync bool
}

// OpenDecisionLog opens the decision log at path for appending, creating
// it (mode 0600) when it does not exist; the file is protected from every
// tool the process runs (rule R8).
func OpenDecisionLog(path string, o DecisionLogOptions) (*DecisionLog, error) {
	f, err := decisionlog.Open(path, decisionlog.Options{Sync: o.Sync, Detail: decisionlog.Detail{Calls: o.Calls || o.Content, Content: o.Content}})
	if err != nil {
		return nil, err
	}
	return &DecisionLog{f: f}, nil
}

// Close records the calls still running as cut off, then flushes and
// closes the file; a second Close does nothing.
func (l *DecisionLog) Close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
