package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"aimon.dev/gw/plugin/pluginpb"
	"aimon.dev/gw/tools"
)

// DefaultTimeout is a call's deadline when Tool is given none.
const DefaultTimeout = 2 * time.Minute

// Tool returns the tool name served by the lease's plugin, as a tools.Tool
// whose calls have the given deadline (DefaultTimeout when not positive).
// The plugin starts on the first call; once the lease is released, calls
// fail with an error result and start nothing. Run never fails outward
// (rule C2).
func (l *Lease) Tool(name string, timeout time.Duration) tools.Tool {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &tool{sl: l.sl, name: name, timeout: timeout}
}

type tool struct {
	sl      *slot
	name    string
	timeout time.Duration
}

const outcomeNeutral outcome = -1 // the call ended without a verdict on the plugin

func (t *tool) Run(parent context.Context, env *tools.Env, in tools.Input) tools.Result {
	// The deadline is the tool's, or the caller's when that comes first.
	budget := t.timeout
	if dl, ok := parent.Deadline(); ok && time.Until(dl) < budget {
		budget = time.Until(dl).Round(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(parent, t.timeout)
	defer cancel()

	if wait, n := t.sl.toolBackoff(t.name); wait > 0 {
		return tools.Errorf("The tool %s crashed or hung its plugin %d times in a row; it will not be run for another %s (the plugin's other tools are not affected). The tool was not executed.", t.name, n, wait.Round(time.Second))
	}
	p, err := t.sl.acquire(ctx)
	if err != nil {
		switch {
		case errors.Is(parent.Err(), context.Canceled):
			return tools.Failure(err, "The call to %s was cancelled before its plugin started.", t.name)
		case ctx.Err() != nil:
			return tools.Failure(err, "The plugin of %s did not start within the call's deadline of %s; the tool was not executed. Try again later.", t.name, budget)
		}
		return tools.Failure(err, "The tool %s is not available: %s. The tool was not executed.", t.name, sentence(err))
	}
	info, ok := p.byName[t.name]
	if !ok {
		t.sl.release(p, outcomeOK)
		names := make([]string, len(p.tools))
		for i, ti := range p.tools {
			names[i] = ti.Name
		}
		slices.Sort(names)
		return tools.Errorf("The plugin %s serves no tool named %s; it serves %s. Fix plugin.tool in the policy. The tool was not executed.",
			t.sl.spec, t.name, strings.Join(names, ", "))
	}

	if in == nil {
		in = tools.Input{}
	}
	input, err := json.Marshal(in)
	if err != nil {
		t.sl.release(p, outcomeNeutral)
		return tools.Failure(err, "The input of %s could not be encoded as JSON; the tool was not executed.", t.name)
	}
	req := &pluginpb.ExecuteRequest{Tool: t.name, Input: input}
	if env != nil {
		req.Workdir, req.Chain, req.CallId = env.Workdir, slices.Clone(env.Chain), env.CallID
	}
	resp, err := p.rpc.Execute(ctx, req)
	if err == nil {
		t.sl.release(p, outcomeOK)
		t.sl.toolOK(t.name)
		return tools.Result{Text: resp.GetText(), IsError: resp.GetIsError()}
	}

	code := status.Code(err)
	// The deadline may have passed before ctx's timer has run: gRPC then
	// already says DeadlineExceeded while ctx.Err() is still nil.
	dl, _ := ctx.Deadline()
	late := ctx.Err() != nil || code == codes.DeadlineExceeded && !time.Now().Before(dl)
	switch {
	case errors.Is(parent.Err(), context.Canceled) && info.Interrupt == tools.ExternallyTerminated:
		// The tool is interrupted by killing its process (rule K1).
		t.sl.release(p, outcomeKill)
		return tools.Failure(err, "The call to %s was cancelled; its plugin process was killed and will be restarted for the next call.", t.name)
	case errors.Is(parent.Err(), context.Canceled):
		// The cancellation reached the plugin through gRPC; the process
		// stays.
		t.sl.release(p, outcomeNeutral)
		return tools.Failure(err, "The call to %s was cancelled.", t.name)
	case late:
		t.sl.release(p, outcomeFailed)
		t.sl.toolFailed(t.name)
		return tools.Failure(err, "The tool %s did not finish within %s; its plugin process was killed, and %s. The call may have done part of its work.", t.name, budget, t.sl.restartHint(t.name))
	case code == codes.Unavailable || code == codes.Canceled || p.client.Exited():
		if t.sl.h.isClosed() {
			t.sl.release(p, outcomeNeutral)
			return tools.Failure(err, "The plugin of %s was stopped because the gateway is shutting down; the call did not finish.", t.name)
		}
		_, exit := t.sl.release(p, outcomeFailed)
		t.sl.toolFailed(t.name)
		how := ""
		if exit != "" {
			how = " (" + exit + ")"
		}
		return tools.Failure(err, "The plugin process serving %s exited during the call%s; the call failed, and %s.", t.name, how, t.sl.restartHint(t.name))
	}
	// The plugin answered with an error status of its own.
	t.sl.release(p, outcomeNeutral)
	return tools.Failure(err, "The plugin serving %s failed the call: %s.", t.name, strings.TrimSuffix(status.Convert(err).Message(), "."))
}

// sentence makes an error's text the middle of a sentence.
func sentence(err error) string {
	return strings.TrimSuffix(err.Error(), ".")
}

// restartHint says when the plugin will be started again.
func (sl *slot) restartHint(tool string) string {
	if wait, n := sl.toolBackoff(tool); wait > 0 {
		return fmt.Sprintf("after %d failures in a row %s will not be run for %s; the plugin is restarted for its other tools", n, tool, wait.Round(time.Second))
	}
	return "the plugin will be restarted for the next call"
}
