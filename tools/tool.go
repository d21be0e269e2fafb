// Package tools holds the contract between the gateway and a tool (rules C1–C5):
// what a tool is given, what it returns, and the per-session state it may share.
package tools

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Input is a call's input object exactly as decoded once from the wire: JSON
// objects are map[string]any, arrays []any, numbers json.Number. Tools must
// not modify it (rule C3).
type Input = map[string]any

// Tool executes one call. Run never fails outward (rule C2): every failure is
// an error Result. The gateway also recovers a panic, but a tool must not
// rely on that.
type Tool interface {
	Run(ctx context.Context, env *Env, in Input) Result
}

// Instant is implemented by a tool whose calls do no I/O and finish in
// microseconds (Echo): a batch of only such calls runs in order even where
// it could run in parallel, which is faster (rule K2 allows, never forces).
type Instant interface {
	Instant() bool
}

// Func adapts a plain function to Tool.
type Func func(ctx context.Context, env *Env, in Input) Result

// Run calls f.
func (f Func) Run(ctx context.Context, env *Env, in Input) Result { return f(ctx, env, in) }

// Result is what a call returns (rule C3). Cause is logged, never sent to
// the model. Structured, when set, is the result as a value that the tool's
// declared output schema describes (MCP structuredContent); Text stays the
// whole answer for clients that ignore structure.
type Result struct {
	Text       string
	IsError    bool
	Cause      error
	Structured any
}

// OK is a successful result.
func OK(text string) Result { return Result{Text: text} }

// Errorf is an error result whose text is a sentence the model can act on.
func Errorf(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// Failure is an error result for an unexpected failure: the sentence goes to
// the model and cause to the log (rule C7).
func Failure(cause error, format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true, Cause: cause}
}

// Env is the context of one call (rule C5). It is shared by the calls of a
// session and read-only but for Files, which is safe for concurrent use (C4).
type Env struct {
	// Workdir is the absolute working directory; "" when none was given.
	Workdir string
	// Chain is the surface chain, main agent first: "agent",
	// "subagent:NAME", "skill:NAME", "command:NAME".
	Chain []string
	// CallID is the tool_use id of the call.
	CallID string
	// Files is the set of files read so far in this session (rule C6).
	Files *FileSet
	// Scope is what the call's permission decision allowed of the file
	// system (rule R6); nil when no path pattern limits the call.
	Scope *Scope
	// MaxFileBytes bounds the files Edit and Write produce; 0 means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// Sandbox is where the call's commands may write (rule R6); nil for a
	// tool the policy gives no sandbox.
	Sandbox *Sandbox
	// Log is the gateway's logger, for the tool's own logs (rule C7); nil
	// means none.
	Log *slog.Logger
}

// Scope is the part of the file system a call of a path tool was allowed:
// every file it opens is opened anchored at Anchor, so that no symbolic
// link or ".." takes it out, and a search visits only the paths Allows
// admits (the same patterns that allowed the call).
type Scope struct {
	// Anchor is the directory the deciding entry allows: the literal prefix
	// of its pattern, "/" for a name-only entry.
	Anchor string
	// Allows reports whether the surface may act on the absolute path; nil
	// allows everything below Anchor.
	Allows func(path string) bool
	// Reaches reports whether Allows may admit some path strictly below
	// the absolute directory, so that a search need not read one where it
	// would refuse every file; nil when not known.
	Reaches func(dir string) bool
}

// MayAllowBelow reports whether Allows may admit some path below dir: true
// unless Reaches says no.
func (s *Scope) MayAllowBelow(dir string) bool {
	return s == nil || s.Allows == nil || s.Reaches == nil || s.Reaches(dir)
}

// DefaultMaxFileBytes is the largest file Edit and Write produce unless the
// policy says otherwise.
const DefaultMaxFileBytes = 16 << 20

// Logger returns the call's logger, one that discards when it has none.
func (e *Env) Logger() *slog.Logger {
	if e == nil || e.Log == nil {
		return discard
	}
	return e.Log
}

var discard = slog.New(slog.DiscardHandler)

// Invoker is the kind of the innermost surface: agent, subagent, skill or command.
func (e *Env) Invoker() string {
	if len(e.Chain) == 0 {
		return "agent"
	}
	kind, _, _ := strings.Cut(e.Chain[len(e.Chain)-1], ":")
	return kind
}

// With returns a copy of e for another call of the same session.
func (e *Env) With(callID string, chain []string) *Env {
	c := *e
	c.CallID = callID
	c.Chain = slices.Clone(chain)
	return &c
}

// FileSet is the files read so far in a session, each with what the read
// saw (rule C6), safe for concurrent use.
type FileSet struct {
	mu    sync.RWMutex
	paths map[string]FileState
}

// FileState is what a read saw of a file: enough to tell that it changed.
type FileState struct {
	Size    int64
	ModTime time.Time
	// ChangeTime is the inode's change time, which no one can set back as
	// one can the modification time (rule C6).
	ChangeTime time.Time
	Inode      uint64
}

// NewFileSet returns an empty set.
func NewFileSet() *FileSet { return &FileSet{paths: map[string]FileState{}} }

// Add records path as read, with no state to compare against.
func (s *FileSet) Add(path string) { s.Record(path, FileState{}) }

// Record records path as read in the state st.
func (s *FileSet) Record(path string, st FileState) {
	s.mu.Lock()
	s.paths[path] = st
	s.mu.Unlock()
}

// Has reports whether path was recorded.
func (s *FileSet) Has(path string) bool {
	_, ok := s.State(path)
	return ok
}

// State returns what the last read of path saw.
func (s *FileSet) State(path string) (FileState, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.paths[path]
	return st, ok
}

// ValidName reports whether name is a tool name every model provider
// accepts (rule C1): ^[a-zA-Z0-9_-]{1,64}$. A loop, not a regular
// expression: compiling {1,64} costs every process of the binary 0.4 ms at
// start-up, which the hook pays per call.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Concurrency and interrupt declarations (rule K1).
const (
	Sequential     = "sequential"
	ConcurrentSafe = "concurrent_safe"

	NonInterruptible     = "non_interruptible"
	Cooperative          = "cooperative"
	ThreadInterrupt      = "thread_interrupt"
	ExternallyTerminated = "externally_terminated"
)

// MayRunInParallel reports whether a tool with these declarations may share a
// batch with others (rule K1): only concurrent-safe tools that are
// non-interruptible or cooperative.
func MayRunInParallel(concurrency, interrupt string) bool {
	return concurrency == ConcurrentSafe && (interrupt == NonInterruptible || interrupt == Cooperative)
}
