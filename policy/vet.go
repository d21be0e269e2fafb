package policy

import (
	"context"
	"errors"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/reload"
)

// Vet returns every problem of the policy, as aimon-gw vet prints them:
// the load's warnings, the entries that deny or leave no tool, the bounds
// no value can meet, and what binding its tools finds (a plugin that does
// not start). It binds the tools as vet does, offline: an upstream server's
// tools come from the pins, and no server is started or reached. A
// problem that stops the policy from serving is a Diagnostic that is not
// a Warning; err is for a failure that is not the policy's (ctx ended).
func (p *Policy) Vet(ctx context.Context) ([]Diagnostic, error) {
	gen, closeGen, err := reload.OnceLoaded(orBackground(ctx), p.ref.Gen, true, p.ref.Timeout, p.log, nil)
	var errs ipolicy.Errors
	switch {
	case errors.As(err, &errs):
		return diagnostics(errs), nil
	case err != nil:
		return nil, err
	}
	defer closeGen()
	return diagnostics(ipolicy.Vet(gen.Generation)), nil
}
