package policy

import ipolicy "aimon.dev/gw/internal/core/policy"

// VendorSchema writes the schema package aimon.dev/gw/schema, as this
// program ships it, below pkgDir (a CUE module's cue.mod/pkg), so that
// stock CUE tools (cue vet, cue eval, an editor's language server) resolve
// a policy's import of it, as aimon-gw init does. A vendored copy that
// differs from the shipped one is a problem Load reports.
func VendorSchema(pkgDir string) error { return ipolicy.VendorSchema(pkgDir) }
