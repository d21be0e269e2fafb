// Package policyref carries a loaded policy from the public package policy
// to the public package gateway without either naming an internal type in
// its API: policy registers how to open its Policy value, gateway asks.
// Nothing here imports a public package (the floors test).
package policyref

import (
	"io/fs"
	"strings"
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

// FSRoot is where the internal load places an fs.FS's files; a place in
// them is given to a program relative to its fs.FS, as it named them.
const FSRoot = "/aimon-gw.embedded/policy/"

// OwnPlaces are the places (file:line:col) of an fs.FS's files relative
// to it, others as they are: at, which the caller alone holds (a
// decision's own, made for it), changed in place (a copy was a twentieth
// of a decision under an fs.FS policy, issue 49).
func OwnPlaces(at []string) []string {
	for i, p := range at {
		if rel, ok := strings.CutPrefix(p, FSRoot); ok {
			at[i] = rel
		}
	}
	return at
}

// Make returns a public *policy.Policy holding r (a watched gateway's
// generation in force); the public package policy sets it in its init.
var Make func(Ref) any

// LoadErrors returns the public policy.Errors of a load's problems that
// err holds, nil when it holds none; set by the public package policy.
var LoadErrors func(error) error
