package mcpfront

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	// The decoder the SDK reads params with (its internal/json), so that
	// what is refused here is what the SDK would refuse, no more.
	segjson "github.com/segmentio/encoding/json"

	"aimon.dev/gw/internal/core/jsonwords"
)

// serverMethods are the requests the SDK's server answers (its
// serverMethodInfos; aimon-gw registers no method of its own), each with
// a new value of the exported type its params decode into (nil: none
// read here), and whether it may come without params.
var serverMethods = map[string]struct {
	params func() any
	bare   bool
}{
	"initialize":               {func() any { return new(mcp.InitializeParams) }, false},
	"ping":                     {func() any { return new(mcp.PingParams) }, true},
	"server/discover":          {nil, true},
	"tools/list":               {func() any { return new(mcp.ListToolsParams) }, true},
	"tools/call":               {func() any { return new(mcp.CallToolParamsRaw) }, false},
	"prompts/list":             {func() any { return new(mcp.ListPromptsParams) }, true},
	"prompts/get":              {func() any { return new(mcp.GetPromptParams) }, false},
	"resources/list":           {func() any { return new(mcp.ListResourcesParams) }, true},
	"resources/templates/list": {func() any { return new(mcp.ListResourceTemplatesParams) }, true},
	"resources/read":           {func() any { return new(mcp.ReadResourceParams) }, false},
	"resources/subscribe":      {func() any { return new(mcp.SubscribeParams) }, false},
	"resources/unsubscribe":    {func() any { return new(mcp.UnsubscribeParams) }, false},
	"subscriptions/listen":     {nil, false},
	"completion/complete":      {func() any { return new(mcp.CompleteParams) }, false},
	"logging/setLevel":         {func() any { return new(mcp.SetLoggingLevelParams) }, false},
}

// RequestProblem is the JSON-RPC error the SDK's server answers request f
// with before any handler runs, in the words the SDK answers it with over
// stdio, where plainError rewords the SDK's own: a method it does not
// answer, params missing, or params it cannot decode into their type (by
// method and member in JSON's words, never the Go type nor the params
// echoed back); nil when the SDK takes f, or f is no request. Over
// streamable HTTP the SDK's handler answers the first two as plain text
// and words the third by the Go type, so the HTTP front asks this first.
// Unread reports the third: the SDK answers it in the request's stream,
// the others by the HTTP status alone.
func RequestProblem(f Frame) (e *jsonrpc.Error, unread bool) {
	if !f.RequestID.IsValid() {
		return nil, false
	}
	m, ok := serverMethods[f.Method]
	switch {
	case !ok:
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", f.Method)}, false
	case len(f.Params) == 0 && !m.bare:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: missing required "params"`}, false
	case m.params == nil || len(f.Params) == 0 || bytes.Equal(f.Params, []byte("null")):
		return nil, false
	}
	dec := segjson.NewDecoder(bytes.NewReader(f.Params))
	dec.DontMatchCaseInsensitiveStructFields()
	var te *segjson.UnmarshalTypeError
	if err := dec.Decode(m.params()); err == nil || !errors.As(err, &te) {
		return nil, false
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: unreadableParams(f.Method, te)}, true
}

// notifications are those the SDK's server takes.
var notifications = map[string]bool{
	"notifications/cancelled":          true,
	"notifications/initialized":        true,
	"notifications/roots/list_changed": true,
	"notifications/progress":           true,
}

// UnknownNotification reports whether f is a notification the SDK's
// server does not take, which stdio ignores.
func UnknownNotification(f Frame) bool {
	return f.ID == nil && f.Method != "" && !notifications[f.Method]
}

// unreadableParams is the sentence for params of method that cannot be
// decoded, on every transport.
func unreadableParams(method string, err error) string {
	return fmt.Sprintf("the params of %s cannot be read: %s", method, jsonwords.Problem(err))
}
