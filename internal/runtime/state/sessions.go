package state

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sessions keep what sessions have read (rule P18) where it outlives one
// process: the hook's sessions, which span one process per call, and a
// fleet's sealed HTTP sessions, which any replica continues. A session
// holds labels, each with the source that first gave it; labels are only
// ever added, so two processes that label one session at once both keep
// theirs. Every store implements it.
type Sessions interface {
	// AddLabel gives session the label, with what gave it, unless it
	// holds it already (the first source stays). The session is kept
	// until the time given, which each label moves on.
	AddLabel(ctx context.Context, session, label string, source []byte, until time.Time) error
	// Labels is every label session holds, with its source; none for a
	// session it does not know.
	Labels(ctx context.Context, session string) (map[string][]byte, error)
	// AddWords keeps text as the user's own words in session (a hook's
	// UserPromptSubmit prompt), until the time given, which it moves on
	// for the session's words; ErrWordsFull when the session keeps
	// MaxSessionWords already, and text is not kept.
	AddWords(ctx context.Context, session string, text []byte, until time.Time) error
	// Words is every text AddWords kept for session; none for a session
	// it does not know.
	Words(ctx context.Context, session string) ([][]byte, error)
}

// MaxWords bounds one text of the user's words that a store keeps (a
// prompt a person typed or pasted), and MaxSessionWords all of a
// session's: what each hook process reads again, to search (rule P18).
const (
	MaxWords        = MaxRecordBytes
	MaxSessionWords = 8 << 20
)

// ErrWordsFull is AddWords' error once a session keeps MaxSessionWords.
var ErrWordsFull = fmt.Errorf("the session keeps %d MiB of the user's words already, and keeps no more", MaxSessionWords>>20)

// SessionsOf is s as Sessions, or nil when s keeps none.
func SessionsOf(s Store) Sessions {
	ss, _ := s.(Sessions)
	return ss
}

// MaxSessionLabels bounds the labels one session keeps: a policy defines
// a handful, and a store never reads an unbounded directory.
const MaxSessionLabels = 256

// sessionDir is the local store's directory of one session, made when
// make is set.
func (l *local) sessionDir(session string, make bool) (string, error) {
	dir := filepath.Join(l.dir, "sessions", key(session))
	if !make {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("%s cannot keep sessions: %w", l, err)
	}
	return dir, nil
}

// AddLabel links a whole file named after the label into the session's
// directory: link fails on a name that exists, so the first source stays
// and a reader never sees half a label. The directory's own time is the
// session's expiry, moved on by each label.
func (l *local) AddLabel(_ context.Context, session, label string, source []byte, until time.Time) error {
	l.sweep()
	dir, err := l.sessionDir(session, true)
	if err != nil {
		return err
	}
	tmp, err := l.write(dir, append([]byte(label+"\n"), source...), until)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(dir, hex.EncodeToString([]byte(label)))); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s cannot label a session: %w", l, err)
	}
	os.Chtimes(dir, until, until)
	return nil
}

func (l *local) Labels(_ context.Context, session string) (map[string][]byte, error) {
	dir, _ := l.sessionDir(session, false)
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot read a session: %w", l, err)
	}
	names, err := d.Readdirnames(MaxSessionLabels + 1)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s cannot read a session: %w", l, err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if strings.HasPrefix(n, ".new-") || n == wordsDir {
			continue
		}
		b, ok, err := l.read(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if label, source, cut := strings.Cut(string(b), "\n"); ok && cut {
			out[label] = []byte(source)
		}
	}
	return out, nil
}

// wordsDir is the directory of a session's words in its directory: not
// a label's name, which is hexadecimal.
const wordsDir = "words"

// AddWords links a whole file of text into the session's words
// directory under a name of its own, after the words it holds. Processes
// that add at once may each pass the bound by one text.
func (l *local) AddWords(_ context.Context, session string, text []byte, until time.Time) error {
	l.sweep()
	if len(text) > MaxWords {
		return fmt.Errorf("a text of %d bytes is more than %s keeps of the user's words (%d)", len(text), l, MaxWords)
	}
	dir, err := l.sessionDir(session, true)
	if err != nil {
		return err
	}
	words := filepath.Join(dir, wordsDir)
	if err := os.MkdirAll(words, 0o700); err != nil {
		return fmt.Errorf("%s cannot keep the user's words: %w", l, err)
	}
	ents, err := os.ReadDir(words)
	if err != nil {
		return fmt.Errorf("%s cannot read the user's words: %w", l, err)
	}
	held := int64(len(text))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			held += fi.Size()
		}
	}
	if held > MaxSessionWords {
		return ErrWordsFull
	}
	tmp, err := l.write(words, text, until)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	name := fmt.Sprintf("%019d-%s", time.Now().UnixNano(), strings.TrimPrefix(filepath.Base(tmp), ".new-"))
	if err := os.Link(tmp, filepath.Join(words, name)); err != nil {
		return fmt.Errorf("%s cannot keep the user's words: %w", l, err)
	}
	os.Chtimes(dir, until, until)
	return nil
}

func (l *local) Words(_ context.Context, session string) ([][]byte, error) {
	dir, _ := l.sessionDir(session, false)
	ents, err := os.ReadDir(filepath.Join(dir, wordsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot read the user's words: %w", l, err)
	}
	var out [][]byte
	held := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".new-") {
			continue
		}
		b, ok, err := l.read(filepath.Join(dir, wordsDir, e.Name()))
		if err != nil {
			return nil, err
		}
		if held += len(b); ok && held <= MaxSessionWords+MaxWords {
			out = append(out, b)
		}
	}
	return out, nil
}

// sweepSessions removes the sessions whose time has passed (from sweep).
func (l *local) sweepSessions(now time.Time) {
	dir := filepath.Join(l.dir, "sessions")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.IsDir() && now.After(fi.ModTime().Add(time.Minute)) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// Redis keeps a session as a hash of label to source: HSETNX keeps the
// first source, atomically across replicas.
func (r *remote) AddLabel(ctx context.Context, session, label string, source []byte, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	k := "aimon-gw:session:" + key(session)
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, k, label, source)
		p.ExpireAt(ctx, k, until)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return nil
}

func (r *remote) Labels(ctx context.Context, session string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	m, err := r.c.HGetAll(ctx, "aimon-gw:session:"+key(session)).Result()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	out := make(map[string][]byte, len(m))
	for l, s := range m {
		out[l] = []byte(s)
	}
	return out, nil
}

// Redis keeps a session's words as a list, and their size beside it,
// counted up before a text is pushed, so that replicas adding at once
// keep the bound.
func (r *remote) AddWords(ctx context.Context, session string, text []byte, until time.Time) error {
	if len(text) > MaxWords {
		return fmt.Errorf("a text of %d bytes is more than %s keeps of the user's words (%d)", len(text), r, MaxWords)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	k := "aimon-gw:session-words:" + key(session)
	held, err := r.c.IncrBy(ctx, k+":bytes", int64(len(text))).Result()
	if err != nil {
		return fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	if held > MaxSessionWords {
		r.c.DecrBy(ctx, k+":bytes", int64(len(text)))
		return ErrWordsFull
	}
	_, err = r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, k, text)
		p.ExpireAt(ctx, k, until)
		p.ExpireAt(ctx, k+":bytes", until)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	return nil
}

func (r *remote) Words(ctx context.Context, session string) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	l, err := r.c.LRange(ctx, "aimon-gw:session-words:"+key(session), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	out := make([][]byte, len(l))
	for i, w := range l {
		out[i] = []byte(w)
	}
	return out, nil
}

// MemorySessions are Sessions in this process's memory: one process, which
// no other shares and a restart forgets.
func MemorySessions() Sessions { return &memSessions{m: map[string]*memSession{}} }

type memSessions struct {
	mu sync.Mutex
	m  map[string]*memSession
}

type memSession struct {
	labels map[string][]byte
	words  [][]byte
	held   int // the bytes of words
	until  time.Time
}

// session is session's record, made when it has none; the sessions
// whose time has passed are dropped first. m.mu is held.
func (m *memSessions) session(session string) *memSession {
	now := time.Now()
	for k, s := range m.m {
		if !now.Before(s.until) {
			delete(m.m, k)
		}
	}
	s := m.m[session]
	if s == nil {
		s = &memSession{labels: map[string][]byte{}}
		m.m[session] = s
	}
	return s
}

func (m *memSessions) AddWords(_ context.Context, session string, text []byte, until time.Time) error {
	if len(text) > MaxWords {
		return fmt.Errorf("a text of %d bytes is more than the memory keeps of the user's words (%d)", len(text), MaxWords)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.session(session)
	if s.held+len(text) > MaxSessionWords {
		return ErrWordsFull
	}
	s.words, s.held, s.until = append(s.words, append([]byte(nil), text...)), s.held+len(text), until
	return nil
}

func (m *memSessions) Words(_ context.Context, session string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.m[session]
	if s == nil || !time.Now().Before(s.until) {
		return nil, nil
	}
	return slices.Clone(s.words), nil
}

func (m *memSessions) AddLabel(_ context.Context, session, label string, source []byte, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.session(session)
	if _, ok := s.labels[label]; !ok && len(s.labels) < MaxSessionLabels {
		s.labels[label] = append([]byte(nil), source...)
	}
	s.until = until
	return nil
}

func (m *memSessions) Labels(_ context.Context, session string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.m[session]
	if s == nil || !time.Now().Before(s.until) {
		return nil, nil
	}
	return maps.Clone(s.labels), nil
}
