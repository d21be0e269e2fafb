package builtin

import (
	"context"
	"strings"

	"aimon.dev/gw/tools"
)

// EchoInput is the input of Echo; it mirrors #EchoInput.
type EchoInput struct {
	Message string `json:"message"`
	Times   *int   `json:"times"`
}

// MaxEcho caps the bytes Echo returns, so that times cannot exhaust memory.
const MaxEcho = 1 << 20

// Echo repeats a message back: the guide's example tool.
type Echo struct{}

// Instant reports that Echo does no I/O: a batch of Echo calls runs in order.
func (Echo) Instant() bool { return true }

// Run repeats the message.
func (Echo) Run(_ context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p EchoInput
	if r, ok := bind(env, "Echo", in, &p); !ok {
		return r
	}
	times := 1
	if p.Times != nil {
		times = *p.Times
	}
	if times < 0 {
		return refuse(env, "Echo", "Parameter 'times' must be 0 or more, got %d.", times)
	}
	if p.Times == nil && len(p.Message) > MaxEcho {
		return refuse(env, "Echo", "Parameter 'message' is %d bytes, longer than the %d bytes a reply may have; send a shorter message.", len(p.Message), MaxEcho)
	}
	if len(p.Message) > 0 && times > MaxEcho/len(p.Message) {
		return refuse(env, "Echo", "Parameter 'times' %d would make the reply longer than %d bytes; use a smaller number.", times, MaxEcho)
	}
	return tools.OK(strings.Repeat(p.Message, times))
}
