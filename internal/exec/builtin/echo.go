package builtin

import (
	"context"
	"encoding/json"
	"strconv"
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
	msg, times, given, ok := echoArgs(in)
	if !ok {
		var p EchoInput
		if r, ok := bind(env, "Echo", in, &p); !ok {
			return r
		}
		msg, times, given = p.Message, 1, p.Times != nil
		if given {
			times = *p.Times
		}
	}
	if times < 0 {
		return refuse(env, "Echo", "Parameter 'times' must be 0 or more, got %d.", times)
	}
	if !given && len(msg) > MaxEcho {
		return refuse(env, "Echo", "Parameter 'message' is %d bytes, longer than the %d bytes a reply may have; send a shorter message.", len(msg), MaxEcho)
	}
	if len(msg) > 0 && times > MaxEcho/len(msg) {
		return refuse(env, "Echo", "Parameter 'times' %d would make the reply longer than %d bytes; use a smaller number.", times, MaxEcho)
	}
	return tools.OK(strings.Repeat(msg, times))
}

// echoArgs reads the input as Bind reads it into EchoInput when it is as
// a model writes it: a string message, and times absent, null or a JSON
// integer. Through Bind's reflection the struct and the int that times
// points to were two allocations of every call (issue 49); any other
// input (ok false) is Bind's, with its sentences.
func echoArgs(in tools.Input) (msg string, times int, given, ok bool) {
	if msg, ok = in["message"].(string); !ok {
		return "", 0, false, false
	}
	switch t := in["times"].(type) {
	case nil:
		return msg, 1, false, true
	case json.Number:
		// Bind's own reading of an integer that fits, exactly.
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil && n == int64(int(n)) {
			return msg, int(n), true, true
		}
	}
	return "", 0, false, false
}
