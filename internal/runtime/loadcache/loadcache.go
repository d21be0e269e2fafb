// Package loadcache keeps what a policy load compiled between one-shot
// processes: the Claude Code hook is a process per tool call, and a CUE
// load costs it many times what one decision does.
//
// A record is trusted only when it verifies: its own checksum, the binary
// that wrote it (path, size, modification time and inode of the
// executable), and a manifest of every file the policy was read from,
// re-read and re-hashed each time, with the listings of the directories
// they lie in. A record that does not verify, for any reason, is ignored
// and the policy is loaded afresh, so a stale or corrupt cache never
// changes a decision. A record is written only after a second load read
// the same files as the first, and only files and a directory that the
// user alone may write are read. The cache is as trusted as the user's
// own files: a process running as that user could as well change the
// hook's settings.
package loadcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"

	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/jsontok"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/watch"
)

// magic begins every record; it changes whenever the record's form does.
const magic = "aimon-gw loadcache 1\n"

// maxRecord bounds what is read of a record.
const maxRecord = 32 << 20

// maxManifest bounds the bytes a manifest hashes on each call: a policy
// directory that holds more (a whole project's tree) is loaded afresh
// rather than re-read whole for every decision.
const maxManifest = 4 << 20

// A Cache keeps records in Dir, one per policy directory.
type Cache struct {
	// Dir holds the records; it is created (0700) when missing.
	Dir string
	// Log receives why a record was not used; nil for none.
	Log *slog.Logger
	// Fresh, when set, is called before a policy is loaded afresh (the
	// hook resumes its collector for a load).
	Fresh func()
	// ahead is the check Prefetch began, which the next restore of its
	// directory takes.
	ahead *ahead
}

// DefaultDir is the user's cache directory for aimon-gw
// ($XDG_CACHE_HOME/aimon-gw, or ~/.cache/aimon-gw).
func DefaultDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "aimon-gw"), nil
}

// Loader loads the policy afresh.
type Loader func() (*policy.Generation, error)

// Load returns the policy in dir (absolute; "" for the embedded policy):
// restored from its record when the record verifies, otherwise from load,
// after which the record is written anew. hit says which. opts are given
// to the restore as to the load (policy.WithWorkdir). Problems of the
// cache itself are never errors: they mean a fresh load.
func (c *Cache) Load(dir string, load Loader, opts ...policy.Option) (g *policy.Generation, hit bool, err error) {
	g, record, err := c.Open(dir, load, opts...)
	if record != nil {
		record()
	}
	return g, err == nil && record == nil, err
}

// Open is Load for a process that serves: on a miss it returns the fresh
// load at once, with record, which writes the record when the caller has
// time for the second load it takes (see store); record is nil on a hit
// and when the load failed.
func (c *Cache) Open(dir string, load Loader, opts ...policy.Option) (g *policy.Generation, record func(), err error) {
	g, m := c.restore(dir, opts)
	if g != nil {
		c.log(false, "the policy is restored from its record", "dir", dir, "revision", g.Revision)
		return g, nil, nil
	}
	c.log(m.suspect, "the policy is loaded afresh", "dir", dir, "because", m.why)
	if c.Fresh != nil {
		c.Fresh()
	}
	g, err = load()
	if err != nil {
		return nil, nil, err
	}
	return g, func() {
		if m := c.store(dir, g, load); m.why != "" {
			c.log(m.suspect, "no record is kept", "dir", dir, "because", m.why)
		} else {
			c.log(false, "the policy is recorded", "dir", dir, "revision", g.Revision)
		}
	}, nil
}

// A miss is why a record was not used or written. A suspect one is a
// warning: a record or a directory others could have written, a record
// that does not read back whole. The rest (no record yet, an edited
// policy, a new binary) is the normal flow of a cache, logged at debug.
type miss struct {
	why     string
	suspect bool
}

func normal(why string) miss  { return miss{why: why} }
func suspect(why string) miss { return miss{why: why, suspect: true} }

func (c *Cache) log(warn bool, msg string, args ...any) {
	switch {
	case c.Log == nil:
	case warn:
		c.Log.Warn(msg, append(args, "cache", c.Dir, "fix", "make the cache directory the gateway user's own with mode 0700, or remove it")...)
	default:
		c.Log.Debug(msg, args...)
	}
}

// A record file is the magic line, the sha256 of the rest, a line of
// record, and the saved generation (policy.Generation.Save).
type record struct {
	Exe      string
	Dir      string
	Manifest manifest
	// Dirs and Inputs are the saved generation's, which its manifest covers.
	Dirs, Inputs []string
}

// path is the record of dir: one file per policy directory, replaced when
// the policy changes.
func (c *Cache) path(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(c.Dir, hex.EncodeToString(sum[:16])+".json")
}

func (c *Cache) restore(dir string, opts []policy.Option) (*policy.Generation, miss) {
	var ck checked
	if a := c.ahead; a != nil && a.dir == dir {
		c.ahead = nil
		<-a.done
		ck = a.checked
	} else {
		ck = c.check(dir)
	}
	if ck.miss.why != "" {
		return nil, ck.miss
	}
	g, err := ck.plan.Restore(opts...)
	if err != nil {
		return nil, suspect(err.Error())
	}
	if !slices.Equal(g.Dirs, ck.dirs) || !slices.Equal(g.Inputs, ck.inputs) {
		return nil, suspect("the record's manifest is not of its policy")
	}
	return g, miss{}
}

// A checked record is what restore makes of a record before the
// options: its plan decoded, and the policy's files found as its
// manifest says, or why not.
type checked struct {
	plan         *policy.Decoded
	dirs, inputs []string
	miss
}

// An ahead is a check begun by Prefetch, done when done is closed.
type ahead struct {
	dir  string
	done chan struct{}
	checked
}

// Prefetch begins, in the background, what Load and Open of dir
// (absolute; "" for the embedded policy) do with its record before they
// need their options: read it, verify it, check the policy's files
// against its manifest and decode its plan. The next Load or Open of
// dir waits for that and goes on from it, so that a hook reads its input
// meanwhile; a later change of the files is the next call's. Prefetch
// and the Load are called from one goroutine.
func (c *Cache) Prefetch(dir string) {
	a := &ahead{dir: dir, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.checked = c.check(dir)
	}()
	c.ahead = a
}

// check reads dir's record and verifies it: its checksum, the binary
// and the policy it is of, the policy's files against its manifest; its
// plan is decoded meanwhile, and used only when all of that holds.
func (c *Cache) check(dir string) checked {
	data, m := c.read(c.path(dir))
	if m.why != "" {
		return checked{miss: m}
	}
	rest, ok := bytes.CutPrefix(data, []byte(magic))
	if !ok {
		if bytes.HasPrefix(data, []byte("aimon-gw loadcache ")) {
			return checked{miss: normal("the record is not of this version")}
		}
		return checked{miss: suspect("the record is not of this version, nor of any")}
	}
	sumHex, body, ok := bytes.Cut(rest, []byte("\n"))
	sum := sha256.Sum256(body)
	if !ok || string(sumHex) != hex.EncodeToString(sum[:]) {
		return checked{miss: suspect("the record's checksum does not match")}
	}
	head, saved, _ := bytes.Cut(body, []byte("\n"))
	r, err := readRecord(head)
	if err != nil {
		return checked{miss: suspect("the record cannot be read: " + err.Error())}
	}
	exe, err := executable()
	if err != nil {
		return checked{miss: suspect(err.Error())}
	}
	switch {
	case r.Exe != exe:
		return checked{miss: normal("another binary wrote the record")}
	case r.Dir != dir:
		return checked{miss: suspect("the record is of another policy")}
	}
	// The plan is decoded while the policy's files are read, and used
	// only once they match the manifest: a stale plan is decoded for
	// nothing, never restored. A hook waits for both.
	type decodedPlan struct {
		plan *policy.Decoded
		err  error
	}
	decoded := make(chan decodedPlan, 1)
	go func() {
		d, err := policy.Decode(saved)
		decoded <- decodedPlan{d, err}
	}()
	now, why := manifestOf(dir, r.Dirs, r.Inputs)
	d := <-decoded
	switch {
	case why != "":
		return checked{miss: normal(why)}
	case !now.equal(r.Manifest):
		return checked{miss: normal("the policy's files changed since the record was written")}
	case d.err != nil:
		return checked{miss: suspect(d.err.Error())}
	}
	return checked{plan: d.plan, dirs: r.Dirs, inputs: r.Inputs}
}

// read reads a record only from a directory and a file that the user owns
// and no one else may write, never through a symbolic link. A cache not
// made yet, or without this record, is a normal miss.
func (c *Cache) read(p string) ([]byte, miss) {
	if _, err := os.Lstat(c.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil, normal("no cache directory yet")
	}
	if why := private(c.Dir, true); why != "" {
		return nil, suspect(why)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, normal("no record yet")
	}
	if err != nil {
		return nil, suspect("the record cannot be opened: " + err.Error())
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, suspect(err.Error())
	}
	if why := privateInfo(p, st, false); why != "" {
		return nil, suspect(why)
	}
	if st.Size() > maxRecord {
		return nil, suspect("the record is too large")
	}
	// Read in one buffer of its size (and one byte more, to see the end):
	// grown from 512 bytes, as io.ReadAll does, its copies were fresh
	// memory to fault in.
	data := make([]byte, 0, st.Size()+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, suspect(err.Error())
		}
		if len(data) > maxRecord {
			return nil, suspect("the record is too large")
		}
		if len(data) == cap(data) {
			data = slices.Grow(data, 4<<10) // it grew since the Stat
		}
	}
	return data, miss{}
}

// readRecord reads a record's head line token by token (package jsontok),
// as encoding/json would read it into a record: its reflection, as json
// v2's, builds each type's decoder in every hook process.
func readRecord(head []byte) (record, error) {
	var r record
	dec := jsontext.NewDecoder(bytes.NewReader(head))
	_, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Exe":
			return jsontok.String(dec, &r.Exe)
		case "Dir":
			return jsontok.String(dec, &r.Dir)
		case "Manifest":
			_, err = jsontok.Object(dec, func(name string) error {
				var err error
				switch name {
				case "Files":
					r.Manifest.Files, err = jsontok.Map(dec, func(s *string) error { return jsontok.String(dec, s) })
				case "Dirs":
					r.Manifest.Dirs, err = jsontok.Map(dec, func(names *[]string) (err error) {
						*names, err = jsontok.Strings(dec)
						return err
					})
				default:
					return jsontok.Unknown("a manifest", name)
				}
				return err
			})
		case "Dirs":
			r.Dirs, err = jsontok.Strings(dec)
		case "Inputs":
			r.Inputs, err = jsontok.Strings(dec)
		default:
			return jsontok.Unknown("a record", name)
		}
		return err
	})
	if err == nil {
		err = jsontok.End(dec, "record on its line")
	}
	return r, err
}

func private(p string, dir bool) string {
	st, err := os.Lstat(p)
	if err != nil {
		return err.Error()
	}
	return privateInfo(p, st, dir)
}

func privateInfo(p string, st os.FileInfo, dir bool) string {
	switch {
	case dir && !st.IsDir():
		return p + " is not a directory"
	case !dir && !st.Mode().IsRegular():
		return p + " is not a regular file"
	case st.Mode().Perm()&0o022 != 0:
		return p + " may be written by others"
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok && int(s.Uid) != os.Geteuid() {
		return p + " belongs to another user"
	}
	return ""
}

// store writes the record of g, when a second load reads the same files
// and makes the same policy: the record then describes what was loaded.
// It returns why it did not ("" when it did).
func (c *Cache) store(dir string, g *policy.Generation, load Loader) miss {
	if _, err := g.Save(); err != nil {
		return normal(err.Error())
	}
	before, why := manifestOf(dir, g.Dirs, g.Inputs)
	if why != "" {
		return normal(why)
	}
	again, err := load()
	if err != nil {
		return normal("the second load failed: " + err.Error())
	}
	after, why := manifestOf(dir, again.Dirs, again.Inputs)
	switch {
	case why != "":
		return normal(why)
	case again.Revision != g.Revision || !slices.Equal(again.Inputs, g.Inputs) || !slices.Equal(again.Dirs, g.Dirs):
		return normal("the policy changed while it was loaded")
	case !before.equal(after):
		return normal("the policy's files changed while it was loaded")
	}
	saved, err := again.Save()
	if err != nil {
		return normal(err.Error())
	}
	exe, err := executable()
	if err != nil {
		return suspect(err.Error())
	}
	head, err := json.Marshal(record{Exe: exe, Dir: dir, Manifest: after, Dirs: again.Dirs, Inputs: again.Inputs})
	if err != nil {
		return suspect(err.Error())
	}
	body := append(append(head, '\n'), saved...)
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return suspect(err.Error())
	}
	if why := private(c.Dir, true); why != "" {
		return suspect(why)
	}
	sum := sha256.Sum256(body)
	f, err := os.CreateTemp(c.Dir, ".record-*")
	if err != nil {
		return suspect(err.Error())
	}
	defer os.Remove(f.Name())
	_, err = fmt.Fprintf(f, "%s%s\n%s", magic, hex.EncodeToString(sum[:]), body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The record appears whole or not at all.
		err = os.Rename(f.Name(), c.path(dir))
	}
	if err != nil {
		return suspect(err.Error())
	}
	return miss{}
}

// manifest is what a policy was read from: each file's sha256, and the
// names in each directory that holds one of its inputs (a new file there
// may join the package).
type manifest struct {
	Files map[string]string
	Dirs  map[string][]string
}

func (m manifest) equal(o manifest) bool {
	return maps.Equal(m.Files, o.Files) && maps.EqualFunc(m.Dirs, o.Dirs, slices.Equal)
}

// manifestOf reads the manifest of the policy in dir now: the files a
// watcher would follow (with the markdown directories extra), and every
// input besides. An embedded policy ("") has none.
func manifestOf(dir string, extra, inputs []string) (manifest, string) {
	m := manifest{Files: map[string]string{}, Dirs: map[string][]string{}}
	if dir == "" {
		return m, ""
	}
	sums, listed, busy := watch.Sums(dir, extra, maxManifest)
	if busy != "" {
		return m, busy
	}
	for p, s := range sums {
		m.Files[p] = hex.EncodeToString(s[:])
	}
	var buf []byte
	for _, in := range inputs {
		if _, ok := m.Files[in]; !ok {
			if buf == nil {
				buf = make([]byte, 32<<10) // one for every file: the hook's heap is not collected
			}
			sum, why := hashFile(in, buf)
			if why != "" {
				return m, why
			}
			m.Files[in] = sum
		}
		d := filepath.Dir(in)
		if _, ok := m.Dirs[d]; ok {
			continue
		}
		if names, ok := listed[d]; ok {
			m.Dirs[d] = names // listed by Sums, not twice
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return m, "cannot list " + d
		}
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		m.Dirs[d] = names
	}
	return m, ""
}

// hashFile hashes a regular file. Anything else (a FIFO put in a file's
// place) is a reason for a fresh load, which reports it; it is never
// opened in a way that could wait (rule C2: a hook must not hang).
func hashFile(p string, buf []byte) (string, string) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", "cannot read " + p
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", p + " is not a regular file"
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.LimitReader(f, maxManifest+1), buf); err != nil {
		return "", "cannot read " + p
	}
	return hex.EncodeToString(h.Sum(nil)), ""
}

// executable identifies the running binary: a record another build wrote
// may hold another compilation of the same files.
func executable() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the running binary: %w", err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("cannot read the running binary: %w", err)
	}
	id := fmt.Sprintf("%s\x00%d\x00%d\x00%s", p, st.Size(), st.ModTime().UnixNano(), runtime.Version())
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		id += fmt.Sprintf("\x00%d\x00%d\x00%d", s.Dev, s.Ino, s.Ctim.Nano())
	}
	return id, nil
}
