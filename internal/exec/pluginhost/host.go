// Package host runs out-of-process tools for the gateway over
// hashicorp/go-plugin (issue 7, rule R4). A Host owns one plugin process per
// Spec, started when first needed; a crashed or hung process fails its call
// with an error result and is replaced by a new client on the next call
// (a go-plugin client cannot be restarted), with backoff after repeated
// failures. No process outlives the gateway: Close stops them, and on Linux
// each child has a parent-death signal for when the gateway is killed.
//
// Use: each policy generation that needs a plugin Acquires a Lease on it,
// Describes it through the lease to import its schemas and makes a Tool of
// the lease for each policy tool; it Releases the lease when it is retired.
// Consecutive generations that hold a lease on the same Spec share one
// process; the last Release stops it once its calls have finished. A
// released slot never starts again, so no call can start a process that
// no generation owns. Close at exit.
//
// Choices:
//   - The process is started by a go-plugin RunnerFunc (runner.go), not by
//     ClientConfig.Cmd: go-plugin hands Cmd the gateway's stdin, which is the
//     agent's protocol stream (rule R1). The checksum is still go-plugin's
//     SecureConfig, checked by the host with a fresh hash before each start.
//   - Plugin stderr reaches slog through ClientConfig.Stderr, never through
//     go-plugin's stderr parser, which panics on some JSON lines (logging.go).
//   - Every stop is bounded (Host.stop); go-plugin's global Managed and
//     CleanupClients are not used.
package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"aimon.dev/gw/plugin/pluginpb"
	"aimon.dev/gw/tools"
)

// Spec is the identity of a plugin process: its command line and the
// sha256 (hex) its binary must have, "" for no check.
type Spec struct {
	Command []string
	SHA256  string
	// Sandbox, when set and not off, is the bubblewrap sandbox the whole
	// plugin process runs in (rule R6).
	Sandbox *tools.Sandbox
}

func (s Spec) key() string {
	k := strings.Join(s.Command, "\x00") + "\x01" + s.SHA256
	if s.Sandbox != nil {
		b, _ := json.Marshal(s.Sandbox)
		k += "\x01" + string(b)
	}
	return k
}

// String is the command line for messages.
func (s Spec) String() string {
	q := make([]string, len(s.Command))
	for i, w := range s.Command {
		if w == "" || strings.ContainsAny(w, " \t\n\"'\\") {
			w = strconv.Quote(w)
		}
		q[i] = w
	}
	return strings.Join(q, " ")
}

// ToolInfo is a tool as its plugin describes it (rules C1, K1). InputSchema
// is the raw JSON Schema the plugin declared (rule S3).
type ToolInfo struct {
	Name, Description      string
	InputSchema            []byte
	Concurrency, Interrupt string
}

// Option configures a Host.
type Option func(*Host)

// Host owns the live plugin processes, keyed by Spec. It is safe for
// concurrent use.
type Host struct {
	log                       *slog.Logger
	startTimeout, killTimeout time.Duration
	describeTimeout           time.Duration // the Describe part of a start
	backoffBase, backoffMax   time.Duration

	mu     sync.Mutex
	slots  map[string]*slot
	live   map[*proc]*slot // every started process until it has stopped
	closed bool
}

// New returns a Host that logs to logger, plugin stderr included.
func New(logger *slog.Logger, opts ...Option) *Host {
	h := &Host{
		log:             logger,
		startTimeout:    20 * time.Second,
		describeTimeout: 20 * time.Second,
		killTimeout:     3 * time.Second,
		backoffBase:     time.Second,
		backoffMax:      time.Minute,
		slots:           map[string]*slot{},
		live:            map[*proc]*slot{},
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// slot is where a Spec's process lives; a process ends and a new one takes
// its place. All fields are guarded by mu.
type slot struct {
	h    *Host
	spec Spec

	mu       sync.Mutex
	cur      *proc         // the live process, nil when none
	starting chan struct{} // closed when the start in progress ends
	fails    int           // failures in a row: crashes, hangs, failed starts
	lastErr  error         // why the last start failed
	retryAt  time.Time     // no start before this, after repeated failures
	retired  bool          // released by its last lease, or closed: no more calls
	// Crashes and hangs are counted per tool: a tool that keeps crashing
	// its process is backed off alone, and its siblings restart at once.
	toolFails map[string]int
	toolRetry map[string]time.Time
	refs      int // leases held on the slot (guarded by Host.mu)
}

// proc is one started plugin process. inflight, dead and retiring are
// guarded by the slot's mu.
type proc struct {
	client *goplugin.Client
	cmd    *exec.Cmd
	rpc    pluginpb.ToolsClient
	tools  []ToolInfo
	byName map[string]ToolInfo

	inflight int
	dead     bool // failed or being stopped: takes no new calls
	retiring bool // stop once inflight reaches zero
	stopped  bool // a stop was started

	done chan struct{} // closed when the process has been stopped
}

var errClosed = errors.New("the gateway is shutting down")

// errRetired is the error of a call whose plugin a reload removed.
var errRetired = errors.New("the plugin was removed from the policy by a reload")

// A Lease is one owner's hold on the process of a Spec (a policy
// generation's). It is safe for concurrent use.
type Lease struct {
	sl   *slot
	once sync.Once
}

// Acquire returns a lease on the process of s, sharing the process with
// every other lease on the same Spec. The process starts when first needed.
func (h *Host) Acquire(s Spec) *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := s.key()
	sl := h.slots[k]
	if sl == nil {
		sl = &slot{h: h, spec: Spec{Command: slices.Clone(s.Command), SHA256: s.SHA256, Sandbox: s.Sandbox}}
		if h.closed {
			sl.retired = true
		} else {
			h.slots[k] = sl
		}
	}
	sl.refs++
	return &Lease{sl: sl}
}

// Release gives the lease up. The last release of a Spec retires its slot:
// the process stops once its calls in flight have finished, and calls made
// later through the lease's tools fail with an error result. Release is
// idempotent.
func (l *Lease) Release() {
	l.once.Do(func() {
		h := l.sl.h
		h.mu.Lock()
		l.sl.refs--
		last := l.sl.refs == 0
		if last && h.slots[l.sl.spec.key()] == l.sl {
			delete(h.slots, l.sl.spec.key())
		}
		h.mu.Unlock()
		if last {
			l.sl.retire(false)
		}
	})
}

// Spec is what the lease holds.
func (l *Lease) Spec() Spec { return l.sl.spec }

// Describe returns the tools the plugin serves, starting it if needed.
func (l *Lease) Describe(ctx context.Context) ([]ToolInfo, error) {
	sl := l.sl
	p, err := sl.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer sl.release(p, outcomeOK)
	return slices.Clone(p.tools), nil
}

// acquire returns the live process with one more call in flight, starting
// one if there is none. Concurrent callers share one start.
func (sl *slot) acquire(ctx context.Context) (*proc, error) {
	sl.mu.Lock()
	for {
		if sl.retired {
			sl.mu.Unlock()
			if sl.h.isClosed() {
				return nil, errClosed
			}
			return nil, errRetired
		}
		if p := sl.cur; p != nil && !p.dead {
			p.inflight++
			sl.mu.Unlock()
			return p, nil
		}
		ch := sl.starting
		if ch == nil {
			if wait := time.Until(sl.retryAt); sl.fails >= 2 && wait > 0 {
				err := fmt.Errorf("the plugin %s failed %d times in a row (last: %v); it will not be restarted for another %s",
					sl.spec, sl.fails, sl.lastErr, wait.Round(time.Second))
				sl.mu.Unlock()
				return nil, err
			}
			ch = make(chan struct{})
			sl.starting = ch
			// A fresh goroutine forks the child: it is never locked to
			// its OS thread, so that thread lives as long as the
			// gateway and the parent-death signal only fires when the
			// gateway dies (see procattr_linux.go).
			go sl.start(ch)
		}
		sl.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sl.mu.Lock()
		if p := sl.cur; !sl.retired && (p == nil || p.dead) {
			err := sl.lastErr
			sl.mu.Unlock()
			if err == nil {
				err = errors.New("the plugin stopped right after it started")
			}
			return nil, err
		}
	}
}

func (sl *slot) start(done chan struct{}) {
	p, err := sl.h.launch(sl.spec)
	if err == nil {
		sl.h.mu.Lock()
		sl.h.live[p] = sl
		sl.h.mu.Unlock()
	}
	sl.mu.Lock()
	sl.starting = nil
	switch {
	case err != nil:
		sl.failed(err)
	case sl.retired:
		p.dead, p.stopped = true, true
		go sl.h.stop(p, false)
	default:
		sl.cur = p
	}
	close(done)
	sl.mu.Unlock()
}

// toolFailed counts a crash or hang of tool and sets its back-off: none
// after the first, base after the second in a row, doubling. The process
// itself is restarted for the next call of any other tool.
func (sl *slot) toolFailed(tool string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.toolFails == nil {
		sl.toolFails, sl.toolRetry = map[string]int{}, map[string]time.Time{}
	}
	sl.toolFails[tool]++
	if n := sl.toolFails[tool]; n >= 2 {
		d := sl.h.backoffBase << min(n-2, 20)
		if d > sl.h.backoffMax || d <= 0 {
			d = sl.h.backoffMax
		}
		sl.toolRetry[tool] = time.Now().Add(d)
	}
}

// toolOK resets tool's count of crashes.
func (sl *slot) toolOK(tool string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	delete(sl.toolFails, tool)
	delete(sl.toolRetry, tool)
}

// toolBackoff is how long tool is still backed off, and after how many
// crashes in a row; 0 when it may run.
func (sl *slot) toolBackoff(tool string) (time.Duration, int) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if wait := time.Until(sl.toolRetry[tool]); sl.toolFails[tool] >= 2 && wait > 0 {
		return wait, sl.toolFails[tool]
	}
	return 0, 0
}

// failed counts a failure and sets the backoff. sl.mu is held.
func (sl *slot) failed(err error) {
	sl.fails++
	sl.lastErr = err
	if sl.fails >= 2 {
		d := sl.h.backoffBase << min(sl.fails-2, 20)
		if d > sl.h.backoffMax || d <= 0 {
			d = sl.h.backoffMax
		}
		sl.retryAt = time.Now().Add(d)
	}
}

type outcome int

const (
	outcomeOK     outcome = iota // the plugin answered
	outcomeFailed                // crashed or hung: stop it, count a failure
	outcomeKill                  // interrupted by killing (K1 externally_terminated)
)

// release ends a call on p. A failed process is stopped at once (with its
// other calls); a retiring one once its last call is done. It returns
// whether this call stopped p, and p's exit status when it did.
func (sl *slot) release(p *proc, o outcome) (stoppedHere bool, exit string) {
	sl.mu.Lock()
	p.inflight--
	force := false
	switch {
	case o == outcomeFailed && !p.dead:
		p.dead = true
		if sl.cur == p {
			sl.cur = nil
		}
		force = true
	case o == outcomeKill && !p.dead:
		p.dead = true
		if sl.cur == p {
			sl.cur = nil
		}
		force = true
	case o == outcomeOK && sl.cur == p:
		sl.fails = 0
	}
	stop := (force || p.retiring && p.inflight == 0) && !p.stopped
	if stop {
		p.stopped, p.dead = true, true
	}
	sl.mu.Unlock()
	if !stop {
		return false, ""
	}
	return true, sl.h.stop(p, force)
}

// retire takes sl out of service. Its process stops when its last call is
// done, or at once when now is set (its calls then fail).
func (sl *slot) retire(now bool) {
	sl.mu.Lock()
	sl.retired = true
	p := sl.cur
	sl.cur = nil
	if p == nil || p.stopped {
		sl.mu.Unlock()
		return
	}
	p.retiring = true
	if !now && p.inflight > 0 {
		sl.mu.Unlock()
		return
	}
	p.stopped, p.dead = true, true
	sl.mu.Unlock()
	go sl.h.stop(p, false)
}

// Close stops every process, calls in flight included, and waits for them
// to end; each stop is bounded in time. Calls after Close fail with an
// error result.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	all := h.slots
	h.slots = map[string]*slot{}
	h.mu.Unlock()
	for _, sl := range all {
		sl.retire(true)
	}
	// A start in progress sees its slot retired and stops what it started.
	for _, sl := range all {
		sl.mu.Lock()
		ch := sl.starting
		sl.mu.Unlock()
		if ch != nil {
			<-ch // bounded by the start timeout
		}
	}
	// Every process still there: those above, and those that an earlier
	// a last Release left to finish their calls.
	h.mu.Lock()
	live := maps.Clone(h.live)
	h.mu.Unlock()
	for p, sl := range live {
		sl.mu.Lock()
		stop := !p.stopped
		p.stopped, p.dead = true, true
		sl.mu.Unlock()
		if stop {
			go h.stop(p, false)
		}
	}
	for p := range live {
		<-p.done
	}
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
