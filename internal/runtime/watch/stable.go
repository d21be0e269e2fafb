package watch

import (
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// snapshot hashes every file the policy may be read from: the regular files
// in and below the directory (hidden directories and editor files aside),
// in its ancestors up to the module root, and in cue.mod. busy is why the
// files cannot be taken now ("" when they can): one of them is open for
// writing by some process, or cannot be read.
func (w *Watcher) snapshot() (sums map[string][32]byte, busy string) {
	sums, busy = w.sums(0)
	if busy == "" {
		if p := openForWriting(sums); p != "" {
			busy = p + " is open for writing"
		}
	}
	return sums, busy
}

// Sums hashes the files a policy in dir (absolute) may be read from, as a
// watcher on it with these extra directories follows them: the files in
// and below dir and each extra directory, cue.mod, and the .cue files of
// dir's ancestors up to the module root. busy says which file cannot be
// read ("" when all can), or that the files hold more than budget bytes
// (0: no bound), after which Sums reads no more. listed holds the names
// (sorted, as os.ReadDir gives them) in each directory it listed whole,
// by its cleaned path: the load cache's manifest lists the directories
// of a policy's inputs, most of them these, and lists only the rest.
func Sums(dir string, extra []string, budget int64) (sums map[string][32]byte, listed map[string][]string, busy string) {
	w := &Watcher{dir: dir, modRoot: moduleRoot(dir), extra: extra}
	listed = map[string][]string{}
	sums, busy = w.sumsListed(budget, listed)
	return sums, listed, busy
}

func (w *Watcher) sums(budget int64) (sums map[string][32]byte, busy string) {
	return w.sumsListed(budget, nil)
}

// sumsListed is sums that keeps in listed (when not nil) the names of
// each directory it listed whole.
func (w *Watcher) sumsListed(budget int64, listed map[string][]string) (sums map[string][32]byte, busy string) {
	sums = map[string][32]byte{}
	failed := map[string]bool{} // a directory not listed whole
	// names are one walk's listings, kept where no walk before listed the
	// directory (an extra one may lie in dir).
	names := map[string][]string{}
	keep := func() {
		for d, n := range names {
			if _, ok := listed[d]; !ok && listed != nil {
				listed[d] = n
			}
		}
		clear(names)
	}
	list := func(dir, name string) {
		dir = filepath.Clean(dir)
		names[dir] = append(names[dir], name)
	}
	var read int64
	buf := make([]byte, 32<<10) // one for every file: the hook's heap is not collected
	// add hashes p, a directory entry of type typ: one the listing says
	// is a regular file is opened without a Stat first.
	add := func(p string, typ fs.FileMode) {
		if busy != "" {
			return
		}
		if !typ.IsRegular() {
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				return // the loader reports what is not a regular file
			}
		}
		// Opened without waiting and checked again on the descriptor: a
		// FIFO put in the file's place since it was listed must not hang
		// a read.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			busy = "cannot read " + p
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			busy = p + " is no longer a regular file"
			return
		}
		if read += st.Size(); budget > 0 && read > budget {
			busy = "the files a policy there may be read from hold more than " + strconv.FormatInt(budget, 10) + " bytes"
			return
		}
		h := sha256.New()
		if _, err := io.CopyBuffer(h, onlyReader{f}, buf); err != nil {
			busy = "cannot read " + p
			return
		}
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		sums[p] = sum
	}
	walk := func(top string) {
		// A directory reached through a link (a ConfigMap's, swapped whole
		// on an update) is walked where the link leads now, under its own
		// name: WalkDir reports a link at the top as a file.
		if fi, err := os.Lstat(top); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			top += string(filepath.Separator)
		}
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if busy != "" {
				return fs.SkipAll
			}
			if err != nil {
				failed[filepath.Clean(p)] = true
				return nil
			}
			if p != top {
				// WalkDir reads a directory's names whole, then walks
				// each, the skipped ones too.
				list(filepath.Dir(p), d.Name())
			}
			switch {
			case d.IsDir() && p != top && strings.HasPrefix(d.Name(), "."):
				return fs.SkipDir
			case !d.IsDir() && !editorTemp(d.Name()):
				add(p, d.Type())
			}
			return nil
		})
		keep()
	}
	walk(w.dir)
	for _, d := range w.extra {
		walk(d)
	}
	if cm := w.cueMod(); cm != "" {
		walk(cm)
	}
	for _, a := range w.ancestors() {
		entries, err := os.ReadDir(a)
		if err != nil {
			failed[filepath.Clean(a)] = true
		}
		for _, e := range entries {
			list(a, e.Name())
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".cue") {
				add(filepath.Join(a, e.Name()), e.Type())
			}
		}
		keep()
	}
	for dir := range failed {
		delete(listed, dir)
	}
	if busy != "" {
		clear(listed) // the walk stopped: some were not listed whole
	}
	return sums, busy
}

// onlyReader hides a file's WriteTo, which would copy through a buffer of
// its own (io.CopyBuffer uses a WriterTo before the buffer it is given).
type onlyReader struct{ io.Reader }

// openForWriting returns one of the files that some process holds open for
// writing, "" for none. It reads /proc (Linux); where that cannot be read
// it finds nothing, and the double read alone decides.
func openForWriting(files map[string][32]byte) string {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fdDir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			if _, ok := files[target]; !ok {
				continue
			}
			info, err := os.ReadFile(filepath.Join("/proc", p.Name(), "fdinfo", fd.Name()))
			if err != nil {
				continue
			}
			if writable(string(info)) {
				return target
			}
		}
	}
	return ""
}

// writable reads the access mode from an fdinfo's "flags:" line (octal).
func writable(fdinfo string) bool {
	for _, line := range strings.Split(fdinfo, "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&3 != 0 // O_WRONLY or O_RDWR
		}
	}
	return false
}
