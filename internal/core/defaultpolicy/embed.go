// Package defaultpolicy ships the policy the gateway serves when it is given
// no --policy, so that it runs with no files of its own.
package defaultpolicy

import (
	"embed"
	"io/fs"
)

//go:embed *.cue
var files embed.FS

// FS is the default policy's files.
func FS() fs.FS { return files }
