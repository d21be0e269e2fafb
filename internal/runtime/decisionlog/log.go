// Package decisionlog records every decided call as one JSON line in a
// file (--decision-log): lossless, since each record is written before the
// next call of its batch is answered, and failing closed, since a record
// that cannot be written makes the gateway allow no further call.
package decisionlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/rule"
)

// A Record is one decided call.
type Record struct {
	Time        time.Time `json:"time"`
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
	Generation  int64     `json:"generation"`
	DurationMS  float64   `json:"duration_ms"`
	ResultError *bool     `json:"result_error,omitempty"`
	Reason      string    `json:"reason"`
}

// A File appends records to a file, one write each. Safe for concurrent use.
type File struct {
	mu   sync.Mutex
	f    *os.File
	err  error
	path string
}

// Open opens (creating) the file to append to.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the decision log %s: %w", path, err)
	}
	return &File{f: f, path: path}, nil
}

// Path is the file's absolute path: no tool may write it (rule R8).
func (l *File) Path() string {
	p, _ := filepath.Abs(l.path)
	return p
}

// Log appends r. Once a write has failed, every later one fails too: the
// gateway then allows no call (fail closed).
func (l *File) Log(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		l.err = fmt.Errorf("cannot write the decision log %s: %w", l.path, err)
	}
	return l.err
}

// Err is why the log can no longer be written; nil while it can.
func (l *File) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close syncs the file to disk and closes it.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.f.Sync(); err != nil && l.err == nil {
		l.err = err
	}
	return l.f.Close()
}
