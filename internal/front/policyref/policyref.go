// Package policyref carries a loaded policy from the public package policy
// to the public package gateway without either naming an internal type in
// its API: policy registers how to open its Policy value, gateway asks.
// Nothing here imports a public package (the floors test).
package policyref

import (
	"io/fs"
	"time"

	"aimon.dev/gw/internal/core/policy"
)

// A Ref is what a public policy.Policy holds: the compiled generation and
// how it was loaded, so that a gateway provisions and tests it alike.
type Ref struct {
	Gen *policy.Generation
	// Dir is the absolute policy directory; "" for a policy loaded from an
	// fs.FS or the embedded default.
	Dir string
	// FS holds the files of a policy loaded from an fs.FS; nil otherwise.
	FS fs.FS
	// Workdir is what relative path patterns resolved against at load.
	Workdir string
	// Timeout bounds a load and a provisioning; 0 for none.
	Timeout time.Duration
}

// Of returns the Ref of a public *policy.Policy (nil for nil or another
// value); the public package policy sets it in its init.
var Of func(any) *Ref
