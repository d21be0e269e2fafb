// Package schema ships the CUE package that defines a policy and the
// built-in tools' input schemas, embedded in the binary.
package schema

import "embed"

// Files holds the CUE files of the package aimon.dev/gw/schema and of its
// subpackages (aimon.dev/gw/schema/claudecode, codex and geminicli).
//
//go:embed *.cue claudecode/*.cue codex/*.cue geminicli/*.cue
var Files embed.FS

// ImportPath is the CUE import path of this package.
const ImportPath = "aimon.dev/gw/schema"

// Module is the CUE module that holds it.
const Module = "aimon.dev/gw@v0"
