package gateway

import (
	"io/fs"
	"os"
	"path/filepath"

	"aimon.dev/gw/internal/exec/sandbox"
)

// hostFS answers the decision's questions of this host's file system
// (decide.FS), with the paths the gateway protects and conceals
// (sandbox.Protect, New and Swap).
type hostFS struct{}

func (hostFS) LandsAt(p string) string  { return sandbox.LandsAt(p) }
func (hostFS) RealPath(p string) string { return sandbox.RealPath(p) }

func (hostFS) IsDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func (hostFS) Concealing(paths ...string) string { return sandbox.Concealing(paths...) }
func (hostFS) ConcealedBelow(dir string) string  { return sandbox.ConcealedBelow(dir) }

func (hostFS) WriteRefusal(p string) (string, bool) {
	g := sandbox.Guarding(p)
	return g.Refusal(), g.Gate
}

func (hostFS) Existing(p string) string {
	for ; p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			return p
		}
	}
	return p
}

func (hostFS) Home() string {
	h, _ := os.UserHomeDir()
	return h
}

func (hostFS) WalkDir(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }
