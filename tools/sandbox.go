package tools

import (
	"log/slog"
	"sync"
)

// Sandbox is where a command a tool runs may write and what it may see
// (rule R6), derived per call from the policy: the gateway computes it, and
// a tool that runs programs runs them inside it.
type Sandbox struct {
	// Off is set when the policy turned the sandbox off (mode "off").
	Off bool `json:"off,omitempty"`
	// Writable are the directories the command may write; "/" for all. A
	// private /tmp is always writable and not listed.
	Writable []string `json:"writable"`
	// ReadOnly stay read-only even inside a writable directory: the policy
	// directory and the gateway's and plugins' binaries.
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden are not readable at all.
	Hidden []string `json:"hidden,omitempty"`
	// Network is whether the command reaches the network.
	Network bool `json:"network"`
	// Hosts, when Network is false, are the hosts (netproxy patterns) the
	// command reaches through the gateway's proxy, and nothing else.
	Hosts []string `json:"hosts,omitempty"`
	// Log receives what the sandbox's proxy refuses; nil for slog's default.
	Log *slog.Logger `json:"-"`
	// Env names the environment variables passed through besides PATH,
	// HOME, LANG, LC_*, TERM and TMPDIR.
	Env []string `json:"env,omitempty"`
	// Executable are the policy's sandbox.exec entries: paths ("DIR/**" for
	// a tree; relative to the working directory) where the command may
	// execute what it writes. Elsewhere, what it may write it cannot run.
	Executable []string `json:"executable,omitempty"`
	// Exec, when set, judges every program the command starts, where it
	// starts (rule P16).
	Exec *ExecJudge `json:"-"`
	// NoExec are where other calls of the policy may write (its other
	// surfaces, its file tools): the command executes nothing there
	// either, outside Executable (rule P16).
	NoExec []string `json:"noexec,omitempty"`
	// Labels are the session's labels whose flows bound the sandbox and
	// Exec (rule P18), sorted; a hook hands them to aimon-gw exec in its
	// ticket, which bounds the command by the same entries.
	Labels []string `json:"labels,omitempty"`
}

// ExecJudge judges the programs a sandboxed command starts (rule P16).
type ExecJudge struct {
	// Names are the command names the call's deny and ask entries start
	// with: a program that is one of them, by its file, is judged as it.
	Names []string
	// Decide judges one program's name and real arguments: "" when it may
	// run; else the sentence naming the entries, ask when they ask for
	// approval.
	Decide func(words []string) (reason string, ask bool)
	// Approved are the simple commands of the call as a person approved
	// it: a program an ask entry holds runs only when it is one of them.
	Approved [][]string
	// Refused is told of each program refused, before it is killed, for
	// the decision log: the words it was judged as, the file it is and
	// its argument vector as it was started.
	Refused func(words []string, program string, argv []string, reason string)

	mu      sync.Mutex
	refused []string
	await   func()
}

// Await makes Refusals wait first for f, which returns once every
// program the command started has been judged (package sandbox: its
// tracer, once the sandbox has ended).
func (j *ExecJudge) Await(f func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.await = f
}

// Note records the refusal of a program, for the call's result.
func (j *ExecJudge) Note(reason string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.refused = append(j.refused, reason)
}

// Refusals are the sentences of the programs refused so far: of all the
// command started, once it has ended.
func (j *ExecJudge) Refusals() []string {
	j.mu.Lock()
	f := j.await
	j.mu.Unlock()
	if f != nil {
		f()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.refused...)
}
