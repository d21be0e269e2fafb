package mcpfront

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestR7PlainResultIsTheSDKsBytes: the result the guard's path writes
// straight from the decision's text is marshalResult's (the SDK's
// encoding) byte for byte, for texts that each encoder spells in its own
// way (HTML's <, > and &, U+2028, text that is not UTF-8, control
// characters, quotes, an empty text), an error result, a typed result
// and one carrying the server's info; a result of any other shape (its
// own _meta, structured content, annotations, two contents, an image, an
// input request) is left to marshalResult. Its frame is EncodeMessage's
// byte for byte, and an id EncodeMessage would spell otherwise (a string
// with <, > or &) or an error is left to EncodeMessage.
func TestR7PlainResultIsTheSDKsBytes(t *testing.T) {
	impl := &mcp.Implementation{Name: "aimon-gw", Version: "v1 <&>"}
	info, err := json.Marshal(impl)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"hello", "", "a <b> & \"c\" \\ d", "line\u2028sep\u2029", "bad \xff utf-8", "tab\tnl\n\x00\x1f", "é 日本 😀", "[redacted aws-access-key]"}
	ids := []any{float64(1), float64(-7), float64(1 << 40), "a", "\u0033", "x\"y", "é"}
	for _, text := range texts {
		for _, isError := range []bool{false, true} {
			for _, typed := range []bool{false, true} {
				for _, perRequest := range []bool{false, true} {
					res := func() *mcp.CallToolResult {
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
					}
					got, ok := plainResult(res(), info, typed, perRequest)
					want, err := marshalResult(res(), impl, typed, perRequest)
					if !ok || err != nil || string(got) != string(want) {
						t.Errorf("%q error %v typed %v perRequest %v (ok %v, %v):\n  plain %s\n    SDK %s", text, isError, typed, perRequest, ok, err, got, want)
					}
					for _, raw := range ids {
						id, err := jsonrpc.MakeID(raw)
						if err != nil || !id.IsValid() {
							t.Fatalf("id %#v: %v", raw, err)
						}
						resp := &jsonrpc.Response{ID: id, Result: got}
						frame, ok := resultFrame(resp)
						sdk, err := jsonrpc.EncodeMessage(resp)
						if !ok || err != nil || string(frame) != string(sdk) {
							t.Errorf("id %#v (ok %v, %v):\n  plain %s\n    SDK %s", raw, ok, err, frame, sdk)
						}
					}
				}
			}
		}
	}
	other := map[string]*mcp.CallToolResult{
		"its own _meta":      {Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}},
		"structured content": {Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"a": 1}},
		"annotations":        {Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}},
		"content's _meta":    {Content: []mcp.Content{&mcp.TextContent{Text: "x", Meta: mcp.Meta{"k": "v"}}}},
		"two contents":       {Content: []mcp.Content{&mcp.TextContent{Text: "x"}, &mcp.TextContent{Text: "y"}}},
		"an image":           {Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
		"no content":         {Content: []mcp.Content{}},
		"an input request":   {InputRequests: mcp.InputRequestMap{"approve": &mcp.ElicitParams{Message: "ok?"}}, RequestState: "s"},
		"nil":                nil,
	}
	for name, res := range other {
		if b, ok := plainResult(res, info, true, true); ok {
			t.Errorf("%s: written straight as %s, want it left to the SDK's encoding", name, b)
		}
	}
	if b, ok := plainResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}}, nil, false, true); ok {
		t.Errorf("without the server's info, a result that carries it was written straight: %s", b)
	}
	for _, raw := range []any{"<", "a&b", "x>"} {
		id, _ := jsonrpc.MakeID(raw)
		if b, ok := resultFrame(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}); ok {
			t.Errorf("id %q framed straight as %s, which EncodeMessage spells unescaped", raw, b)
		}
	}
	id, _ := jsonrpc.MakeID(float64(1))
	if b, ok := resultFrame(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: 1, Message: "m"}}); ok {
		t.Errorf("an error was framed straight as %s", b)
	}
}

// BenchmarkAnswerEncoding: an Echo's answer frame (protocol 2026-07-28,
// the server's info in _meta) written straight (plainResult, resultFrame)
// and through the SDK's encoders (marshalResult, EncodeMessage), in one
// interleaved loop; straight/sdk is the ratio of their times (issue 49).
func BenchmarkAnswerEncoding(b *testing.B) {
	impl := &mcp.Implementation{Name: "aimon-gw", Version: "v1"}
	info, _ := json.Marshal(impl)
	id, _ := jsonrpc.MakeID(float64(7))
	res := func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}
	}
	var straight, sdk time.Duration
	for b.Loop() {
		t0 := time.Now()
		r, _ := plainResult(res(), info, true, true)
		if _, ok := resultFrame(&jsonrpc.Response{ID: id, Result: r}); !ok {
			b.Fatal("not framed")
		}
		t1 := time.Now()
		r, _ = marshalResult(res(), impl, true, true)
		if _, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: r}); err != nil {
			b.Fatal(err)
		}
		straight, sdk = straight+t1.Sub(t0), sdk+time.Since(t1)
	}
	b.ReportMetric(float64(straight.Nanoseconds())/float64(b.N), "straight-ns/op")
	b.ReportMetric(float64(sdk.Nanoseconds())/float64(b.N), "sdk-ns/op")
	b.ReportMetric(float64(straight)/float64(sdk), "straight/sdk")
}
