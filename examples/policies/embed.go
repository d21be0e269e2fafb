// Package policies ships the example policies, so that the gateway can run
// on the default one with no files of its own.
package policies

import (
	"embed"
	"io/fs"
)

//go:embed default/*.cue
var files embed.FS

// Default is the policy served when no --policy is given.
func Default() fs.FS {
	sub, _ := fs.Sub(files, "default")
	return sub
}
