//go:build !linux

package builtin

import (
	"io/fs"
	"os"

	"aimon.dev/gw/tools"
)

// Elsewhere than Linux, without openat2, the anchor is checked for links
// and every open takes the root's way.
func (a *anchor) plain() bool                                          { return false }
func (a *anchor) beneath(rel string, flag int) (*os.File, error, bool) { return nil, nil, false }
func (a *anchor) closeDir()                                            {}
func (a *anchor) linkFree(rel string) bool                             { return false }

// rawFile stands for a descriptor read as it is; none is opened here.
type rawFile struct{ *os.File }

func (a *anchor) openPlain(path string) (rawFile, int64, bool) { return rawFile{}, 0, false }
func (a *anchor) listBeneath(rel string, stat func(string) bool) ([]fs.DirEntry, error, bool) {
	return nil, nil, false
}

func readWhole(dir, path string) ([]byte, tools.FileState, bool) {
	return nil, tools.FileState{}, false
}
