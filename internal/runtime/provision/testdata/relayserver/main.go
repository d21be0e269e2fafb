// Command relayserver is a test MCP server on the official Go SDK with
// the tools of addTools, over stdio; it copies every frame
// it receives to the file named by AIMON_TEST_FRAMES, so that a test can
// tell what reached it; its tool die exits in the middle of a call. With AIMON_TEST_OTHERID set it answers every
// tools/call under other ids than the call's (one of the gateway's form
// that it never sent, and a number), and never under the call's own.
//
// With AIMON_TEST_HTTP set it serves streamable HTTP instead, stateful, at
// an address of its own, whose endpoint it writes as its first line: each
// POST's body is copied to the frames file, one a line, and the MCP
// headers of each to the file named by AIMON_TEST_HEADERS; calls are
// answered in event streams, or in JSON with AIMON_TEST_JSON set; with
// AIMON_TEST_STATELESS set it is stateless, and speaks 2026-07-28; with
// AIMON_TEST_OTHERID set, in JSON under another id; with
// AIMON_TEST_GARBAGE set, with what is not JSON.
package main

import (
	"bufio"
	ctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	var in io.Reader = os.Stdin
	if f := os.Getenv("AIMON_TEST_FRAMES"); f != "" {
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		in = io.TeeReader(in, fh)
	}
	if os.Getenv("AIMON_TEST_HTTP") != "" {
		serveHTTP()
		return
	}
	if os.Getenv("AIMON_TEST_OTHERID") != "" || os.Getenv("AIMON_TEST_GARBAGE") != "" {
		otherIDs(in)
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "relayserver", Version: "v1"}, nil)
	addTools(s)
	s.AddTool(&mcp.Tool{Name: "die", Description: "Exits in the middle of the call.", InputSchema: map[string]any{"type": "object"}}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	if err := s.Run(ctx.Background(), &mcp.IOTransport{Reader: io.NopCloser(in), Writer: os.Stdout}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// otherIDs speaks just enough MCP to list one tool, and answers its calls
// under ids that are not theirs (with AIMON_TEST_GARBAGE set, with a line
// that is not JSON).
func otherIDs(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	out := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		answer := func(id any, result any) { out.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result}) }
		switch m.Method {
		case "initialize":
			answer(m.ID, map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "otherid", "version": "v1"}})
		case "tools/list":
			answer(m.ID, map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			if os.Getenv("AIMON_TEST_GARBAGE") != "" {
				fmt.Println("hello, not JSON")
				continue
			}
			r := map[string]any{"content": []any{map[string]any{"type": "text", "text": "under another id"}}}
			answer("aimon-gw/999999", r)
			answer(424242, r)
		default:
			out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
	}
}

// addTools adds to s tools that answer with each shape of result a
// tools/call can have, for tests that compare two ways of calling them:
// echo (its text), two (two texts), image (an image and a text),
// structured (structured content alone), fails (an error result), broken
// (a JSON-RPC error), big (a text of the size asked), headed (a parameter
// bound to a header, x-mcp-header), roots (a request to the client in the middle of the
// call) and slow (an answer only once the call is cancelled, or after a
// minute).
func addTools(s *mcp.Server) {
	obj := map[string]any{"type": "object"}
	text := func(ts ...string) *mcp.CallToolResult {
		r := &mcp.CallToolResult{}
		for _, t := range ts {
			r.Content = append(r.Content, &mcp.TextContent{Text: t})
		}
		return r
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its text."}, func(_ ctx.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "two", Description: "Answers with two texts.", InputSchema: obj}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("one <&>", "two \u2028"), nil
	})
	s.AddTool(&mcp.Tool{Name: "image", Description: "Answers with an image and a text.", InputSchema: obj}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("\x89PNG"), MIMEType: "image/png"}, &mcp.TextContent{Text: "a picture"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "structured", Description: "Answers with structured content alone.", InputSchema: obj}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"b": 1.5, "a": []any{"x", nil, true}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fails", Description: "Answers with an error result.", InputSchema: obj}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "broken", Description: "Answers with a JSON-RPC error.", InputSchema: obj}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("broken on purpose")
	})
	type bigIn struct {
		Size int `json:"size"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers with a text of size bytes."}, func(_ ctx.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.Size)), nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "headed", Description: "Answers with its region, which the client also sends in a header.", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}}}}, func(_ ctx.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Region string `json:"region"`
		}
		json.Unmarshal(req.Params.Arguments, &in)
		return text(in.Region), nil
	})
	s.AddTool(&mcp.Tool{Name: "roots", Description: "Asks the client for its roots in the middle of the call, and answers with their number.", InputSchema: obj}, func(c ctx.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(c, nil)
		if err != nil {
			return nil, err
		}
		return text(fmt.Sprintf("%d roots", len(res.Roots))), nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Answers once the call is cancelled.", InputSchema: obj}, func(c ctx.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-c.Done():
			return text("cancelled"), nil
		case <-time.After(time.Minute):
			return text("not cancelled"), nil
		}
	})
}

// serveHTTP serves the tools over streamable HTTP (see the package's
// comment) until the process is killed.
func serveHTTP() {
	s := mcp.NewServer(&mcp.Implementation{Name: "relayserver", Version: "v1"}, nil)
	addTools(s)
	s.AddTool(&mcp.Tool{Name: "die", Description: "Exits in the middle of the call.", InputSchema: map[string]any{"type": "object"}}, func(ctx.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: os.Getenv("AIMON_TEST_JSON") != "", Stateless: os.Getenv("AIMON_TEST_STATELESS") != ""})
	var mu sync.Mutex
	// Both files under one lock, so that their lines pair.
	record := func(body, headers []byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range []struct {
			name string
			b    []byte
		}{{os.Getenv("AIMON_TEST_FRAMES"), body}, {os.Getenv("AIMON_TEST_HEADERS"), headers}} {
			if fh, err := os.OpenFile(f.name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				fh.Write(append(f.b, '\n'))
				fh.Close()
			}
		}
	}
	garbage, other := os.Getenv("AIMON_TEST_GARBAGE"), os.Getenv("AIMON_TEST_OTHERID") != ""
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			hs := map[string]string{}
			for _, k := range []string{"Accept", "Content-Type", "Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version", "Mcp-Param-Region", "Authorization"} {
				hs[k] = r.Header.Get(k)
			}
			hs["Mcp-Session-Id set"] = fmt.Sprint(r.Header.Get("Mcp-Session-Id") != "")
			hb, _ := json.Marshal(hs)
			record(body, hb)
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && (garbage != "" || other) {
				w.Header().Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
				switch {
				case other:
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"jsonrpc":"2.0","id":424242,"result":{"content":[{"type":"text","text":"under another id"}]}}`)
				case os.Getenv("AIMON_TEST_JSON") != "":
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `hello, not JSON`)
				default:
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, "event: message\ndata: hello, not JSON\n\n")
				}
				return
			}
		}
		sdk.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/mcp\n", l.Addr())
	fmt.Fprintln(os.Stderr, http.Serve(l, h))
	os.Exit(1)
}
