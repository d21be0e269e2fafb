// Package state is what the gateway's processes share: today the approvals
// already spent, so that one approval runs one call once across every
// process that holds its key and across restarts (rule R10). A process
// keeps it in a local store under its state directory; a fleet shares it
// in Redis.
package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Store records what has been spent.
type Store interface {
	// Spend records id as spent until the time given and reports whether
	// this was its first spend. An error means it is not known: the
	// caller must not run what id approves (fail closed).
	Spend(ctx context.Context, id string, until time.Time) (first bool, err error)
	// Ping reports whether the store can be reached.
	Ping(ctx context.Context) error
	// String names the store for sentences and logs (never a password).
	String() string
	Close() error
}

// Timeout bounds each round trip to a store.
const Timeout = 2 * time.Second

// Open returns the store spec names: "" or a path for a local store in
// that directory (dir when spec is ""), redis://… or rediss://… for Redis.
func Open(spec, dir string) (Store, error) {
	switch {
	case strings.HasPrefix(spec, "redis://") || strings.HasPrefix(spec, "rediss://"):
		return openRedis(spec)
	case strings.Contains(spec, "://"):
		return nil, fmt.Errorf("the state store %q is neither a directory nor a redis:// or rediss:// URL", spec)
	case spec != "":
		dir = spec
	}
	if dir == "" {
		return nil, errors.New("there is no state directory: give --state DIR or redis://HOST:PORT")
	}
	return openLocal(dir)
}

// DefaultDir is the user's state directory for aimon-gw
// ($XDG_STATE_HOME/aimon-gw, or ~/.local/state/aimon-gw).
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "aimon-gw"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "aimon-gw"), nil
}

// key is the name under which id is kept: a digest, so that an id holds
// nothing a reader of the store could use.
func key(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// local keeps one file per spent id, made with O_EXCL: the file system
// makes the spend atomic between processes, and the files outlive them.
// (An embedded database would add a lock that a second process waits on;
// a file per id needs no lock at all.)
type local struct {
	dir string
	// now is the limits' clock; nil for time.Now.
	now func() time.Time

	mu    sync.Mutex
	swept time.Time
}

func openLocal(dir string) (*local, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	spent := filepath.Join(dir, "spent")
	if err := os.MkdirAll(spent, 0o700); err != nil {
		return nil, fmt.Errorf("the state directory %s cannot be made: %w", dir, err)
	}
	fi, err := os.Lstat(spent)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("the state directory's %s is not a directory", spent)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the state directory %s may be read or written by others (mode %v); make it 0700", spent, fi.Mode().Perm())
	}
	return &local{dir: dir}, nil
}

// LocalDir is the directory of a local store, "" for another.
func LocalDir(s Store) string {
	if l, ok := s.(*local); ok {
		return l.dir
	}
	return ""
}

func (l *local) String() string { return "the local state store in " + l.dir }

func (l *local) Spend(_ context.Context, id string, until time.Time) (bool, error) {
	l.sweep()
	name := filepath.Join(l.dir, "spent", key(id))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s cannot record a spend: %w", l, err)
	}
	// Once the file exists the id is spent, whatever the write below
	// does: the expiry in it only lets the sweep remove it later.
	f.WriteString(strconv.FormatInt(until.Unix(), 10))
	f.Close()
	return true, nil
}

// sweep removes, at most once a minute, the ids whose time has passed: an
// expired approval is refused for its expiry before its spend is asked.
func (l *local) sweep() {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.swept) < time.Minute {
		l.mu.Unlock()
		return
	}
	l.swept = now
	l.mu.Unlock()
	l.sweepRecords(now)
	l.sweepSessions(now)
	dir := filepath.Join(l.dir, "spent")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		// A file still empty is being written: keep it.
		if until, err := strconv.ParseInt(string(b), 10, 64); err == nil && now.Unix() > until+60 {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func (l *local) Ping(context.Context) error {
	_, err := os.Stat(filepath.Join(l.dir, "spent"))
	return err
}

func (l *local) Close() error { return nil }

// remote is Redis: one SET NX with the id's expiry is the spend, atomic
// across every replica that shares the server.
type remote struct {
	c    *redis.Client
	name string
}

// quiet is the Redis client's own logger: none. Its lines ("redis:
// 2026/12/03 pool.go:770: … failed to dial") went to standard error
// beside the gateway's, in no format of --log-format; what a store that
// cannot be reached means is logged once, by the gateway, as a sentence.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func openRedis(spec string) (*remote, error) {
	redis.SetLogger(quiet{})
	opt, err := redis.ParseURL(spec)
	if err != nil {
		return nil, fmt.Errorf("the state store %q is not a Redis URL it can use: %v", redacted(spec), err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = Timeout, Timeout, Timeout
	opt.MaxRetries = 1
	return &remote{c: redis.NewClient(opt), name: "the Redis state store at " + opt.Addr}, nil
}

// redacted is spec without its password.
func redacted(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		return "(an unreadable URL)"
	}
	return u.Redacted()
}

func (r *remote) String() string { return r.name }

func (r *remote) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	err := r.c.SetArgs(ctx, "aimon-gw:spent:"+key(id), 1, redis.SetArgs{Mode: "NX", ExpireAt: until}).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return true, nil
}

func (r *remote) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return nil
}

func (r *remote) Close() error { return r.c.Close() }
