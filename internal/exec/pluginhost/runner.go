package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/plugin"
	"aimon.dev/gw/tools"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// cmdRunner runs a plugin process for go-plugin. It replaces go-plugin's
// own runner, which go-plugin gives the gateway's stdin: that is the agent's
// protocol stream, and a plugin reading it would steal tool calls. Here the
// plugin's stdin is /dev/null, and a kill reaches its whole process group.
type cmdRunner struct {
	cmd            *exec.Cmd
	stdout, stderr io.ReadCloser
}

// newRunner returns the go-plugin RunnerFunc that starts cmd. go-plugin
// passes a stand-in command that carries only the environment it wants the
// plugin to have (the handshake cookie, the socket directory).
func newRunner(cmd *exec.Cmd, sb *tools.Sandbox) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, socketDir string) (runner.Runner, error) {
		if sb != nil && !sb.Off {
			// The whole plugin runs sandboxed; go-plugin's socket directory
			// is the one place outside it both sides reach.
			inner := *sb
			inner.Writable = append(slices.Clone(sb.Writable), socketDir)
			sc, err := sandbox.Command(&inner, "", cmd.Args, sandboxEnv(spec.Env), func(name string) bool {
				return strings.HasPrefix(name, "PLUGIN_") || name == plugin.Handshake.MagicCookieKey
			})
			if err != nil {
				return nil, fmt.Errorf("the plugin runs in a bubblewrap sandbox and none can be made here (%v); install bubblewrap and allow user namespaces, or set sandbox: mode: \"off\" on the tool", err)
			}
			sc.SysProcAttr = cmd.SysProcAttr
			*cmd = *sc
		} else {
			cmd.Env = spec.Env
		}
		cmd.Stdin = nil
		r := &cmdRunner{cmd: cmd}
		var err error
		if r.stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
		if r.stderr, err = cmd.StderrPipe(); err != nil {
			return nil, err
		}
		return r, nil
	}
}

// sandboxEnv is the environment bwrap starts with: go-plugin's variables
// and the gateway's, which bwrap clears but for those it passes on.
func sandboxEnv(pluginEnv []string) []string {
	return append(os.Environ(), pluginEnv...)
}

var _ runner.Runner = (*cmdRunner)(nil)

// Start starts the plugin, and lets go of what its sandbox needed only to start.
func (r *cmdRunner) Start(context.Context) error {
	defer sandbox.Release(r.cmd)
	return r.cmd.Start()
}

// Wait waits for the plugin to exit, and removes what its sandbox left.
func (r *cmdRunner) Wait(context.Context) error {
	defer sandbox.Finish(r.cmd)
	return r.cmd.Wait()
}

func (r *cmdRunner) Diagnose(context.Context) string { return "" }
func (r *cmdRunner) Stdout() io.ReadCloser           { return r.stdout }
func (r *cmdRunner) Stderr() io.ReadCloser           { return r.stderr }
func (r *cmdRunner) Name() string                    { return r.cmd.Path }

func (r *cmdRunner) ID() string {
	if r.cmd.Process == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}

// Kill kills the plugin's process group (procAttr makes the plugin its
// leader).
func (r *cmdRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func (r *cmdRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *cmdRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
