// Package decisionlog records every decided call as JSON lines in a file
// (--decision-log), ahead of the tool (rule R10): a call's decision is one
// record written whole before the tool runs, and a call whose record
// cannot be written does not run; what it returned is a second record,
// written after. A record is one write, and a write the disk cuts short is
// cut back out, so no line is ever torn. A record that cannot be written
// makes the gateway allow no further call (fail closed).
package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"aimon.dev/gw/internal/core/rule"
)

// Phases of a record.
const (
	// Decided is a call's decision when its tool does not run after it
	// (refused, or decided only: check, the hook).
	Decided = "decided"
	// Running is the decision of a call whose tool runs next; a Result
	// record with the same call follows it.
	Running = "running"
	// Result is what a call that ran returned.
	Result = "result"
	// Program is a program a call's command started that was refused
	// where it started (rule P16), recorded before it is killed: between
	// the call's Running and Result records (after the hook's Decided one,
	// for the hook's exec). One a program and arguments a call.
	Program = "program"
	// Approval is a person's decision on an asked call, made out of band
	// (the approval page): Approver approved it (Allowed) or denied it.
	Approval = "approval"
	// User is the user's own words as a session got them (rule P18): a
	// digest, and Text only with Detail.Content.
	User = "user"
)

// Version is the version of a record that carries its call (Detail): what
// aimon-gw replay reads. A later version is refused, not misread.
const Version = 1

// Detail is what a log records beyond the decisions, for aimon-gw replay
// (rule P18): each call's canonical input and session, each result's
// labels and digest (Calls), and the texts of results and of the user's
// words themselves (Content), which may hold what the agent read.
type Detail struct {
	Calls, Content bool
}

// A Record is one decided call, or (Phase Result) what it returned.
type Record struct {
	Time        time.Time `json:"time"`
	Phase       string    `json:"phase"`
	CallID      string    `json:"call_id"`
	Tool        string    `json:"tool"`
	Surface     []string  `json:"surface"`
	Principal   string    `json:"principal,omitempty"`
	Subject     any       `json:"subject,omitempty"`
	Allowed     bool      `json:"allowed"`
	Ask         bool      `json:"ask,omitempty"`
	Rule        rule.ID   `json:"rule,omitempty"`
	Entries     []string  `json:"entries,omitempty"`
	Violations  []string  `json:"violations,omitempty"`
	Validation  rule.Mode `json:"validation,omitempty"`
	Revision    string    `json:"revision"`
	Commit      string    `json:"commit,omitempty"`
	Generation  int64     `json:"generation"`
	DurationMS  float64   `json:"duration_ms"`
	ResultError *bool     `json:"result_error,omitempty"`
	Reason      string    `json:"reason"`
	// Program is the file a Program record's program is (its path in the
	// sandbox), Argv its argument vector as it was started.
	Program string   `json:"program,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	// Approver and ApprovalID name who decided a pending approval, and
	// which (Phase Approval).
	Approver   string `json:"approver,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Delegated is the identity a Result's call reached its upstream with
	// (its subject and audience, never the token), for a server reached
	// with each caller's identity.
	Delegated string `json:"delegated,omitempty"`
	// With Detail.Calls: V is Version; Session names the session the call
	// was made in and Workdir its working directory; Input is the
	// canonical call a decision was made on; a Result's Labels are those
	// its result gave the session, and TextSHA256 and TextBytes what it
	// returned (or a User record's words); Text is that text itself, with
	// Detail.Content only.
	V          int            `json:"v,omitempty"`
	Session    string         `json:"session,omitempty"`
	Workdir    string         `json:"workdir,omitempty"`
	Input      map[string]any `json:"input,omitempty"`
	Labels     []string       `json:"labels,omitempty"`
	TextSHA256 string         `json:"text_sha256,omitempty"`
	TextBytes  int            `json:"text_bytes,omitempty"`
	Text       *string        `json:"text,omitempty"`
}

// result is the fields a Result record carries: the decision is in the
// Running record before it.
type result struct {
	Time        time.Time `json:"time"`
	Phase       string    `json:"phase"`
	CallID      string    `json:"call_id"`
	Tool        string    `json:"tool"`
	Surface     []string  `json:"surface"`
	Principal   string    `json:"principal,omitempty"`
	Revision    string    `json:"revision"`
	Generation  int64     `json:"generation"`
	DurationMS  float64   `json:"duration_ms"`
	ResultError bool      `json:"result_error"`
	Reason      string    `json:"reason,omitempty"`
	Delegated   string    `json:"delegated,omitempty"`
	V           int       `json:"v,omitempty"`
	Session     string    `json:"session,omitempty"`
	Labels      []string  `json:"labels,omitempty"`
	TextSHA256  string    `json:"text_sha256,omitempty"`
	TextBytes   int       `json:"text_bytes,omitempty"`
	Text        *string   `json:"text,omitempty"`
}

func (r Record) marshal() ([]byte, error) {
	if r.Phase != Result {
		return json.Marshal(r)
	}
	return json.Marshal(result{Time: r.Time, Phase: r.Phase, CallID: r.CallID, Tool: r.Tool, Surface: r.Surface,
		Principal: r.Principal, Revision: r.Revision, Generation: r.Generation, DurationMS: r.DurationMS,
		ResultError: r.ResultError != nil && *r.ResultError, Reason: r.Reason, Delegated: r.Delegated,
		V: r.V, Session: r.Session, Labels: r.Labels, TextSHA256: r.TextSHA256, TextBytes: r.TextBytes, Text: r.Text})
}

// key matches a Result to its Running record.
type key struct {
	call, principal, tool string
	start                 int64
}

func keyOf(r Record) key { return key{r.CallID, r.Principal, r.Tool, r.Time.UnixNano()} }

// Options configure Open.
type Options struct {
	// Sync flushes each record to the disk before the call goes on
	// (--decision-log-sync): a record then survives a power loss, not only
	// the process's death.
	Sync bool
	// Detail is what the records carry for replay; none by default.
	Detail Detail
}

// ErrClosed is a write after Close: the gateway is stopping.
var ErrClosed = errors.New("the gateway is stopping and its decision log is closed")

// A File appends records to a file, one write each. Safe for concurrent use.
type File struct {
	mu      sync.Mutex
	f       *os.File
	err     error
	path    string
	sync    bool
	closed  bool
	running map[key]Record
	detail  Detail
}

// Open opens (creating) the file to append to.
func Open(path string, o Options) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said already, and "open" is no news
		}
		return nil, fmt.Errorf("cannot open the decision log %s: %w", path, err)
	}
	return &File{f: f, path: path, sync: o.Sync, running: map[key]Record{}, detail: o.Detail}, nil
}

// Detail is what the records carry for replay.
func (l *File) Detail() Detail { return l.detail }

// Synced says each record is flushed to the disk (Options.Sync).
func (l *File) Synced() bool { return l.sync }

// Path is the file's absolute path: no tool may write it (rule R8).
func (l *File) Path() string {
	p, _ := filepath.Abs(l.path)
	return p
}

// Log appends r. Once a write has failed, every later one fails too: the
// gateway then allows no call (fail closed).
func (l *File) Log(r Record) error {
	b, err := r.marshal()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return ErrClosed
	case l.err != nil:
		return l.err
	}
	if err := l.write(append(b, '\n')); err != nil {
		l.err = fmt.Errorf("cannot write the decision log %s: %w", l.path, err)
		return l.err
	}
	switch r.Phase {
	case Running:
		l.running[keyOf(r)] = r
	case Result:
		delete(l.running, keyOf(r))
	}
	return nil
}

// write appends b in one write under an exclusive lock of the file, which
// every process appending to it takes (the hook's run side by side), so
// that a write cut short (a full disk) is the file's last bytes and is cut
// back out: a record is in the file whole or not at all.
func (l *File) write(b []byte) error {
	fd := int(l.f.Fd())
	// A file system without locks (some network ones) still takes the
	// record; the lock only keeps the cut-back safe across processes.
	if unix.Flock(fd, unix.LOCK_EX) == nil {
		defer unix.Flock(fd, unix.LOCK_UN)
	}
	n, err := l.f.Write(b)
	if err != nil && n > 0 {
		end, serr := l.f.Seek(0, io.SeekCurrent)
		if serr == nil {
			serr = l.f.Truncate(end - int64(n))
		}
		if serr != nil {
			return fmt.Errorf("%w; and its last %d bytes, a record cut short, could not be removed (%v)", err, n, serr)
		}
	}
	if err == nil && l.sync {
		err = unix.Fdatasync(fd)
	}
	return err
}

// Err is why the log can no longer be written; nil while it can.
func (l *File) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// Close records the calls still running as cut off (the drain ended before
// they returned), syncs the file to disk and closes it. A call that
// returns later finds the log closed.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	now := time.Now()
	for _, r := range l.running {
		if l.err != nil {
			break
		}
		cut := true
		r.Phase, r.ResultError, r.DurationMS = Result, &cut, float64(now.Sub(r.Time).Microseconds())/1000
		r.Reason = "the gateway stopped before the tool returned (its drain ended): what the tool did may be partial"
		b, err := r.marshal()
		if err == nil {
			err = l.write(append(b, '\n'))
		}
		if err != nil {
			l.err = fmt.Errorf("cannot write the decision log %s: %w", l.path, err)
		}
	}
	l.closed = true
	if err := l.f.Sync(); err != nil && l.err == nil {
		l.err = err
	}
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}
