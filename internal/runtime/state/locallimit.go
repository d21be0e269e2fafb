package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The local store keeps the limits' counts for processes that each decide
// one call and exit (the command hooks, rule P19): memory would forget a
// count with its process. One file a cell, under limits/ of the state
// directory; one lock (flock) over the directory makes a take atomic
// between processes, all of its cells or none.

var _ Limiter = (*local)(nil)

// lockWait is how often a take that finds the lock held tries again.
const lockWait = time.Millisecond

// limits is the directory of the cells, made on first use.
func (l *local) limits() (string, error) {
	dir := filepath.Join(l.dir, "limits")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("%s cannot keep the limits' counts: %w", l, err)
	}
	return dir, nil
}

// lock takes the lock of dir's cells, waiting at most Timeout (or ctx):
// its holders only read and write a few small files, so a lock held
// longer is one a process that hangs holds, and the take fails closed.
func (l *local) lock(ctx context.Context, dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s cannot lock the limits' counts: %w", l, err)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("%s cannot lock the limits' counts: %w", l, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%s: another process has held the lock of the limits' counts for %v (%s); if none is deciding a call, it hangs", l, Timeout, filepath.Join(dir, ".lock"))
		case <-time.After(lockWait):
		}
	}
}

func (l *local) Take(ctx context.Context, cells []Cell) (int, time.Duration, error) {
	dir, err := l.limits()
	if err != nil {
		return 0, 0, err
	}
	lk, err := l.lock(ctx, dir)
	if err != nil {
		return 0, 0, err
	}
	defer lk.Close() // closing it unlocks
	now := l.clock().UnixNano()
	names := make([]string, len(cells))
	ks := make([]*kept, len(cells))
	refused, wait := -1, int64(0)
	for i, c := range cells {
		names[i] = filepath.Join(dir, key(c.Limit+"\x00"+c.Caller))
		k, err := l.readCell(names[i])
		if err != nil {
			return 0, 0, err
		}
		ks[i] = k
		if w := k.wait(now, c); w > wait {
			refused, wait = i, w
		}
	}
	if refused >= 0 {
		return refused, time.Duration(wait), nil
	}
	// Every new state written aside first, then renamed into place: a
	// write that fails spends from no cell.
	tmps := make([]string, len(cells))
	defer func() {
		for _, t := range tmps {
			if t != "" {
				os.Remove(t)
			}
		}
	}()
	for i, c := range cells {
		ks[i].spend(now, c)
		if tmps[i], err = l.writeAside(dir, "a limit's count", fmt.Appendf(nil, "%d %d %d %d", ks[i].tat, ks[i].index, ks[i].n, ks[i].end)); err != nil {
			return 0, 0, err
		}
	}
	for i := range cells {
		if err := os.Rename(tmps[i], names[i]); err != nil {
			return 0, 0, fmt.Errorf("%s cannot write a limit's count: %w", l, err)
		}
		tmps[i] = ""
	}
	l.sweepLimits(dir, lk, now)
	return -1, 0, nil
}

func (l *local) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// readCell is the state of the cell kept in name: "tat index n end", in
// nanoseconds but for the window's index and its count; a zero state,
// which refuses nothing, when there is none.
func (l *local) readCell(name string) (*kept, error) {
	k := &kept{}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot read a limit's count: %w", l, err)
	}
	defer f.Close()
	b := make([]byte, 128)
	n, _ := io.ReadFull(f, b)
	if _, err := fmt.Sscanf(string(b[:n]), "%d %d %d %d", &k.tat, &k.index, &k.n, &k.end); err != nil {
		return nil, fmt.Errorf("%s holds a limit's count that cannot be read (%s: %v); remove the file, which gives that caller the limit's whole allowance again", l, name, err)
	}
	return k, nil
}

// sweepLimits removes, at most once a minute (by the lock's time), the
// cells whose state has expired: each hook is a process of its own, so
// the minute is kept on the lock file, not in memory.
func (l *local) sweepLimits(dir string, lk *os.File, now int64) {
	fi, err := lk.Stat()
	if err != nil || time.Unix(0, now).Sub(fi.ModTime()) < time.Minute {
		return
	}
	os.Chtimes(lk.Name(), time.Time{}, time.Unix(0, now))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		switch {
		case e.Name() == ".lock":
		case strings.HasPrefix(e.Name(), ".new-"):
			if fi, err := e.Info(); err == nil && time.Unix(0, now).Sub(fi.ModTime()) > time.Hour {
				os.Remove(name)
			}
		default:
			// A rate whose time has passed is a full burst, a window
			// ended a count of 0: the same as no file.
			if k, err := l.readCell(name); err == nil && k.tat <= now && k.end <= now {
				os.Remove(name)
			}
		}
	}
}
