package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// pendingMeta is a 2026-07-28 request's _meta.
const pendingMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

// TestR10APendingServersCallIsTypedComplete: at 2026-07-28 a call of a
// tool whose server is still connecting (not listed yet: answered once
// its bound runs out), and of a tool no server has, is answered with
// "resultType":"complete", as a listed tool's result is: over stdio on
// the path that answers the frame itself and on the SDK's, alike byte for
// byte, and over mcp --listen; before 2026-07-28 neither carries one.
func TestR10APendingServersCallIsTypedComplete(t *testing.T) {
	t.Parallel()
	dir := echoBeside(t, `servers: mute: {command: [%[1]q, "60.125"], expose: ["x"], pin: false, timeout: "1s"}
agent: "allowed-tools": ["Echo", "mute__x"]
principals: alice: {subject: "alice", surface: ["agent"]}
`)
	calls := []struct{ name, want string }{
		{"mute__x", "did not answer within 1s"},
		{"nope__tool", "nope__tool"},
	}
	for _, version := range []string{"2025-06-18", "2026-07-28"} {
		meta := ""
		if version >= "2026-07-28" {
			meta = "," + pendingMeta
		}
		var answers [2][]string
		for i, sdk := range []bool{false, true} {
			s := startMCP(t, dir, dir, sdk)
			s.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for k, c := range calls {
				a := s.send(t, `{"jsonrpc":"2.0","id":`+string(rune('1'+k))+`,"method":"tools/call","params":{"name":"`+c.name+`","arguments":{}`+meta+`}}`)
				typed := strings.Contains(a, `"resultType":"complete"`)
				if !strings.Contains(a, c.want) || !strings.Contains(a, `"isError":true`) || typed != (version >= "2026-07-28") {
					t.Errorf("%s sdk %v: %s: %s (typed %v)", version, sdk, c.name, a, typed)
				}
				answers[i] = append(answers[i], a)
			}
			s.end(t)
		}
		for k := range calls {
			if answers[0][k] != answers[1][k] {
				t.Errorf("%s %s:\n  direct %s\n     SDK %s", version, calls[k].name, answers[0][k], answers[1][k])
			}
		}
	}

	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", dir, "--cache", "off", "--tokens", tokensFile(t, staticTokens))
	for _, c := range calls {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+c.name+`","arguments":{},`+pendingMeta+`}}`))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer tok-alice",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": c.name} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if a := string(b); resp.StatusCode != 200 || !strings.Contains(a, c.want) || !strings.Contains(a, `"resultType":"complete"`) {
			t.Errorf("mcp --listen: %s: %d %s", c.name, resp.StatusCode, a)
		}
	}
}
