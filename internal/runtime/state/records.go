package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Records keep small values that every replica must see: a pending
// approval, the decision a person made on it (rule R10). Each has an
// expiry, after which it is gone. Both stores implement it.
type Records interface {
	// Create stores value under key unless the key holds one already, and
	// reports whether it did: the first of two replicas racing wins.
	Create(ctx context.Context, key string, value []byte, until time.Time) (bool, error)
	// Put stores value under key, replacing what it held.
	Put(ctx context.Context, key string, value []byte, until time.Time) error
	// Get is the value under key; ok is false when there is none, or it
	// expired.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
}

// RecordsOf is s as Records, or nil when s keeps none.
func RecordsOf(s Store) Records {
	r, _ := s.(Records)
	return r
}

// MaxRecordBytes bounds one record: a pending call and its arguments.
const MaxRecordBytes = 1 << 20

// records is the local store's directory of records, made on first use.
func (l *local) records() (string, error) {
	dir := filepath.Join(l.dir, "records")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("%s cannot keep records: %w", l, err)
	}
	return dir, nil
}

// write puts a whole record in a temporary file of dir: its expiry on the
// first line, then the value. A reader never sees a part of one, since
// the file gets its name only once it is whole (link or rename).
func (l *local) write(dir string, value []byte, until time.Time) (string, error) {
	if len(value) > MaxRecordBytes {
		return "", fmt.Errorf("a record of %d bytes is more than %s keeps (%d)", len(value), l, MaxRecordBytes)
	}
	return l.writeAside(dir, "a record", []byte(strconv.FormatInt(until.Unix(), 10)+"\n"), value)
}

// writeAside writes parts, whole, to a new temporary file of dir, and
// names it; what says what it holds, for the sentence of a failure.
func (l *local) writeAside(dir, what string, parts ...[]byte) (string, error) {
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return "", fmt.Errorf("%s cannot write %s: %w", l, what, err)
	}
	for _, p := range parts {
		if err == nil {
			_, err = f.Write(p)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("%s cannot write %s: %w", l, what, err)
	}
	return f.Name(), nil
}

func (l *local) Create(_ context.Context, k string, value []byte, until time.Time) (bool, error) {
	dir, err := l.records()
	if err != nil {
		return false, err
	}
	l.sweep()
	tmp, err := l.write(dir, value, until)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	name := filepath.Join(dir, key(k))
	// link fails on a name that exists: atomic between processes, as
	// O_EXCL is, and the record is whole when it appears. An expired
	// record in the way is removed first.
	for range 2 {
		err = os.Link(tmp, name)
		if !errors.Is(err, os.ErrExist) {
			break
		}
		if _, ok, gerr := l.read(name); gerr != nil || ok {
			return false, gerr
		}
		os.Remove(name)
	}
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s cannot write a record: %w", l, err)
	}
	return true, nil
}

func (l *local) Put(_ context.Context, k string, value []byte, until time.Time) error {
	dir, err := l.records()
	if err != nil {
		return err
	}
	tmp, err := l.write(dir, value, until)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, key(k))); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s cannot write a record: %w", l, err)
	}
	return nil
}

func (l *local) Get(_ context.Context, k string) ([]byte, bool, error) {
	dir, err := l.records()
	if err != nil {
		return nil, false, err
	}
	return l.read(filepath.Join(dir, key(k)))
}

// read is the record in the file name, ok false when it is not there or
// has expired.
func (l *local) read(name string) ([]byte, bool, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s cannot read a record: %w", l, err)
	}
	defer f.Close()
	size := int64(MaxRecordBytes + 32)
	if fi, err := f.Stat(); err == nil && fi.Size() < size {
		size = fi.Size() + 1 // a session's label is small: read what it holds
	}
	b := make([]byte, size)
	n, _ := io.ReadFull(f, b)
	head, value, ok := strings.Cut(string(b[:n]), "\n")
	until, err := strconv.ParseInt(head, 10, 64)
	if !ok || err != nil {
		return nil, false, fmt.Errorf("%s holds a record it cannot read (%s); remove it", l, name)
	}
	if time.Now().Unix() >= until {
		return nil, false, nil
	}
	return []byte(value), true, nil
}

// sweepRecords removes the records whose time has passed (from sweep).
func (l *local) sweepRecords(now time.Time) {
	dir := filepath.Join(l.dir, "records")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".new-") {
			// A writer's, or one a crash left: gone after an hour.
			if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > time.Hour {
				os.Remove(name)
			}
			continue
		}
		if _, ok, err := l.read(name); err == nil && !ok {
			os.Remove(name)
		}
	}
}

func (r *remote) Create(ctx context.Context, k string, value []byte, until time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	err := r.c.SetArgs(ctx, "aimon-gw:record:"+key(k), value, redis.SetArgs{Mode: "NX", ExpireAt: until}).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return true, nil
}

func (r *remote) Put(ctx context.Context, k string, value []byte, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := r.c.SetArgs(ctx, "aimon-gw:record:"+key(k), value, redis.SetArgs{ExpireAt: until}).Err(); err != nil {
		return fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return nil
}

func (r *remote) Get(ctx context.Context, k string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	b, err := r.c.Get(ctx, "aimon-gw:record:"+key(k)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return b, true, nil
}

// MemoryRecords are Records in this process's memory, for a gateway with no
// store: one process, which no other shares and a restart forgets.
func MemoryRecords() Records { return &memory{m: map[string]memRecord{}} }

type memory struct {
	mu sync.Mutex
	m  map[string]memRecord
}

type memRecord struct {
	value []byte
	until time.Time
}

func (m *memory) Create(_ context.Context, k string, value []byte, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, r := range m.m {
		if !now.Before(r.until) {
			delete(m.m, k)
		}
	}
	if _, ok := m.m[k]; ok {
		return false, nil
	}
	m.m[k] = memRecord{slices.Clone(value), until}
	return true, nil
}

func (m *memory) Put(_ context.Context, k string, value []byte, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[k] = memRecord{slices.Clone(value), until}
	return nil
}

func (m *memory) Get(_ context.Context, k string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[k]
	if !ok || !time.Now().Before(r.until) {
		return nil, false, nil
	}
	return slices.Clone(r.value), true, nil
}
