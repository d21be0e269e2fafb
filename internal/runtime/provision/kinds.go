package provision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/tools"
)

// Builtins is the kind of the in-process built-in tools, found by name.
type Builtins func(name string) (tools.Tool, bool)

// Bind finds the built-in the tool names.
func (b Builtins) Bind(_ context.Context, t *policy.Tool) (Binding, error) {
	impl, ok := b(t.Builtin)
	if !ok {
		return Binding{}, fmt.Errorf("this gateway has no built-in %s", t.Builtin)
	}
	return Binding{Tool: impl}, nil
}

// DescribeTimeout bounds how long binding a plugin tool waits for its
// plugin to start and describe its tools.
const DescribeTimeout = 30 * time.Second

// Plugins is the kind of tools served by go-plugin processes on a host.
// Binding a tool leases its plugin's process, which starts to describe the
// tool's schema; consecutive generations share it through their leases.
type Plugins struct{ Host *pluginhost.Host }

// Bind leases the tool's plugin and imports what it declares of the tool.
func (p Plugins) Bind(ctx context.Context, t *policy.Tool) (Binding, error) {
	spec := pluginhost.Spec{Command: t.Plugin.Command, SHA256: t.Plugin.SHA256, Sandbox: pluginSandbox(t)}
	lease := p.Host.Acquire(spec)
	ctx, cancel := context.WithTimeout(ctx, DescribeTimeout)
	defer cancel()
	infos, err := lease.Describe(ctx)
	if err != nil {
		lease.Release()
		return Binding{}, err
	}
	var names []string
	for _, info := range infos {
		if info.Name == t.Plugin.Tool {
			return Binding{
				Tool: lease.Tool(t.Plugin.Tool, t.Timeout),
				Declared: &policy.Declared{Description: info.Description, InputSchema: info.InputSchema,
					Concurrency: info.Concurrency, Interrupt: info.Interrupt},
				Release: lease.Release,
			}, nil
		}
		names = append(names, info.Name)
	}
	lease.Release()
	return Binding{}, fmt.Errorf("the plugin %s serves %s, not %q; set plugin.tool to one of them", spec, strings.Join(names, ", "), t.Plugin.Tool)
}

// External is the kind of tools another program runs (Claude Code's own):
// the gateway decides their calls and runs none of them.
type External struct{}

// Bind binds a tool that refuses to run, saying who runs it.
func (External) Bind(_ context.Context, t *policy.Tool) (Binding, error) {
	who := t.External
	return Binding{Tool: tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result {
		return tools.Errorf("%s is run by %s; aimon-gw only decides its calls (aimon-gw hook %s). The tool was not executed.", t.Name, who, who)
	})}, nil
}

// pluginSandbox is the sandbox a plugin's whole process runs in (rule R6):
// what its tool's sandbox block says, with the policy directory and the
// plugin's binary read-only. A plugin is shared by every call of its
// tools, so no call's Write entries widen it; nil for a tool with none.
func pluginSandbox(t *policy.Tool) *tools.Sandbox {
	s := t.Sandbox
	if s == nil || s.Off {
		return nil
	}
	sb := &tools.Sandbox{Writable: homes(s.Write), Hidden: homes(s.Hide), Network: s.Network, Hosts: s.Hosts, Env: s.Env, Executable: s.Exec}
	if sb.Writable == nil {
		sb.Writable = []string{}
	}
	if t.PolicyDir != "" {
		sb.ReadOnly = append(sb.ReadOnly, t.PolicyDir)
	}
	if len(t.Plugin.Command) > 0 && filepath.IsAbs(t.Plugin.Command[0]) {
		sb.ReadOnly = append(sb.ReadOnly, t.Plugin.Command[0])
	}
	return sb
}

// homes expands a leading ~/ to the gateway's home directory.
func homes(ps []string) []string {
	var out []string
	for _, p := range ps {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			if h, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(h, rest)
			}
		}
		out = append(out, p)
	}
	return out
}
