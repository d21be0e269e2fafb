package gateway

import (
	"context"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// goRuntime is the external value of a tool of the Go program that embeds
// the gateway (schema #Tool.external).
const goRuntime = "go"

// goKind binds the external tools: a tool of this program to what it
// registered, else a tool that refuses to run and says why; every other
// external tool as the gateway binds it.
type goKind struct {
	registered map[string]tools.Tool
	other      provision.Kind
}

func (k goKind) Bind(ctx context.Context, t *ipolicy.Tool) (provision.Binding, error) {
	if t.External != goRuntime {
		return k.other.Bind(ctx, t)
	}
	if impl, ok := k.registered[t.Name]; ok {
		return provision.Binding{Tool: impl}, nil
	}
	name := t.Name
	return provision.Binding{Tool: tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result {
		return tools.Errorf("%s is a tool of the Go program that embeds aimon-gw, which registered none by that name (gateway.Register) and serves it itself, behind gateway.Middleware. The tool was not executed.", name)
	})}, nil
}
