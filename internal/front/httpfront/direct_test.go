package httpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/front/mcpfront"
)

// frontPolicy lists Echo and Read to the agent (a Read under secret/ is
// asked), Read alone to the reviewer; alice and bob run on the agent,
// rita on the reviewer under it; alice's Echo is limited to a burst of 3.
const frontPolicy = `tools: {Echo: {builtin: Echo}, Read: {builtin: Read}}
validation: enforce
agent: {allowed-tools: [Echo, "Read(./**)"], ask-tools: ["Read(./secret/**)"]}
subagents: {reviewer: {allowed-tools: ["Read(./**)"], max-effect: read}}
principals:
  alice: {subject: alice, surface: [agent]}
  bob: {subject: bob, surface: [agent]}
  rita: {subject: rita, surface: [agent, "subagent:reviewer"]}
limits: {alice-echo: {who: {principal: alice}, tool: Echo, rate: 1/h, burst: 3}}
`

// connectFront is the go-sdk's client connected to base as token's
// caller, at version ("" for the SDK's latest, 2026-07-28).
func connectFront(t *testing.T, base, token, version string) *mcp.ClientSession {
	t.Helper()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: base + MCPPath, HTTPClient: &http.Client{Transport: bearerRT{token}}, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting as %s: %v", token, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func callText(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) (string, bool, error) {
	t.Helper()
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), r.IsError, nil
}

func listNames(t *testing.T, s *mcp.ClientSession) string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// TestR3ListenReloadSwapsTheReusedServer: the server a chain's calls are
// answered by is made once and reused across requests, and a reload puts
// the new generation in it: a call after the edit is decided by the new
// policy, on the same client sessions at both protocols, and a caller the
// edit maps to another chain is served that chain's tools from then on.
func TestR3ListenReloadSwapsTheReusedServer(t *testing.T) {
	base, gw, dir := serveFront(t, frontPolicy)
	wd := dir
	if err := os.WriteFile(filepath.Join(wd, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := map[string]any{"file_path": filepath.Join(wd, "notes.txt")}
	type session struct {
		who, version string
		s            *mcp.ClientSession
	}
	var alice, bob []session
	for _, v := range []string{"", "2025-11-25"} {
		alice = append(alice, session{"alice", v, connectFront(t, base, "t-alice", v)})
		bob = append(bob, session{"bob", v, connectFront(t, base, "t-bob", v)})
	}
	for _, c := range append(slices.Clone(alice), bob...) {
		if text, isErr, err := callText(t, c.s, "Echo", map[string]any{"message": "before"}); err != nil || isErr || text != "before" {
			t.Fatalf("%s at %q before the reload: Echo %q %v %v", c.who, c.version, text, isErr, err)
		}
	}
	// Echo leaves the agent's list; bob is mapped to the reviewer.
	edited := strings.Replace(frontPolicy, `allowed-tools: [Echo, "Read(./**)"]`, `allowed-tools: ["Read(./**)"]`, 1)
	edited = strings.Replace(edited, "bob: {subject: bob, surface: [agent]}", `bob: {subject: bob, surface: [agent, "subagent:reviewer"]}`, 1)
	edited = strings.Replace(edited, "limits: {alice-echo: {who: {principal: alice}, tool: Echo, rate: 1/h, burst: 3}}\n", "", 1)
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); gw.Current().Number < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edit was not put in force within 30 s")
		}
	}
	for _, c := range append(slices.Clone(alice), bob...) {
		text, isErr, err := callText(t, c.s, "Echo", map[string]any{"message": "after"})
		if err != nil || !isErr || !strings.Contains(text, "Echo") {
			t.Errorf("%s at %q after the reload: Echo must be refused by the new policy: %q %v %v", c.who, c.version, text, isErr, err)
		}
		if text, isErr, err := callText(t, c.s, "Read", read); err != nil || isErr || !strings.Contains(text, "notes") {
			t.Errorf("%s at %q after the reload: Read %q %v %v", c.who, c.version, text, isErr, err)
		}
	}
	if got := listNames(t, alice[0].s); got != "Read" {
		t.Errorf("alice's tools after the reload: %s", got)
	}
	// bob's chain is the reviewer's now: its max-effect read, not the agent's.
	fresh := connectFront(t, base, "t-bob", "2025-11-25")
	if got := listNames(t, fresh); got != "Read" {
		t.Errorf("bob's tools after the reload: %s", got)
	}
	if _, err := fresh.CallTool(context.Background(), &mcp.CallToolParams{Name: "Read", Arguments: read}); err != nil {
		t.Errorf("bob's Read on the reviewer: %v", err)
	}
}

// TestP10ListenPrincipalsNeverShareAView: callers whose calls one reused
// server answers are each decided as themselves: alice's limit refuses her
// fourth Echo and never bob's, though both run on the agent's server, and
// rita, on the reviewer's, is refused the Echo her chain does not list,
// while their calls interleave on one replica at both protocols.
func TestP10ListenPrincipalsNeverShareAView(t *testing.T) {
	base, _, _ := serveFront(t, frontPolicy)
	aliceCalls := 0 // her burst of 3 is spent across both versions
	for _, v := range []string{"", "2025-11-25"} {
		t.Run("version "+v, func(t *testing.T) {
			alice, bob, rita := connectFront(t, base, "t-alice", v), connectFront(t, base, "t-bob", v), connectFront(t, base, "t-rita", v)
			if got := listNames(t, rita); got != "Read" {
				t.Errorf("rita's tools %s", got)
			}
			if got := listNames(t, alice); got != "Echo,Read" {
				t.Errorf("alice's tools %s", got)
			}
			for i := range 6 {
				text, isErr, err := callText(t, alice, "Echo", map[string]any{"message": "a"})
				aliceCalls++
				if aliceCalls <= 3 && (err != nil || isErr || text != "a") {
					t.Errorf("alice's Echo %d: %q %v %v", i+1, text, isErr, err)
				}
				if aliceCalls > 3 && (err == nil || !strings.Contains(err.Error(), `the limit "alice-echo"`)) {
					t.Errorf("alice's Echo %d past her burst must be refused by her limit: %q %v %v", i+1, text, isErr, err)
				}
				if text, isErr, err := callText(t, bob, "Echo", map[string]any{"message": "b"}); err != nil || isErr || text != "b" {
					t.Errorf("bob's Echo %d beside alice's: %q %v %v", i+1, text, isErr, err)
				}
				text, isErr, err = callText(t, rita, "Echo", map[string]any{"message": "r"})
				if err != nil || !isErr || !strings.Contains(text, "Echo") || text == "r" {
					t.Errorf("rita's Echo %d, which her chain does not list: %q %v %v", i+1, text, isErr, err)
				}
			}
		})
	}
}

// TestR7ListenDirectAnswersAsTheSDK: a tools/call the front answers
// itself gets the answer the SDK's stateless path gives the same call (a
// replica of the same policy that hands every request to the SDK), equal
// once decoded (the request state of an ask aside, a sealed token fresh
// each time), at 2025-11-25 and 2026-07-28: allowed, refused by the
// lists, a bad input, an unknown tool, no arguments, an ask.
func TestR7ListenDirectAnswersAsTheSDK(t *testing.T) {
	pol := strings.ReplaceAll(frontPolicy, "./", "/srv/gw-test/") // both replicas' lists alike
	base, _, _ := serveFront(t, pol)
	viaSDK, _, _ := serveFront(t, pol, func(o *Options) { o.viaSDK = true })
	calls := []struct {
		note, name string
		args       any
	}{
		{"allowed", "Echo", map[string]any{"message": "Grüße \u2028 \"x\"", "times": 2}},
		{"a bad input", "Echo", map[string]any{"message": "m", "times": "2"}},
		{"refused by the lists", "Read", map[string]any{"file_path": "/etc/hostname"}},
		{"an unknown tool", "Wirte", map[string]any{}},
		{"no arguments", "Echo", nil},
		{"an ask", "Read", map[string]any{"file_path": "/srv/gw-test/secret/k"}},
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},`
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		for i, c := range calls {
			args, _ := json.Marshal(c.args)
			m := ""
			if version >= newProtocol {
				m = meta
			}
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s"name":%q,"arguments":%s}}`, i+1, m, c.name, args)
			direct, sdk := postFront(t, base, "t-bob", version, c.name, body), postFront(t, viaSDK, "t-bob", version, c.name, body)
			if direct != sdk {
				t.Errorf("%s at %s:\n the front: %s\n the SDK:   %s", c.note, version, direct, sdk)
			}
			if c.note == "an ask" && version >= newProtocol && !strings.Contains(direct, `"resultType":"input_required"`) {
				t.Errorf("the ask at %s is no input request: %s", version, direct)
			}
		}
	}
}

// postFront posts body as token's caller at version and returns the
// message of its one event, decoded and encoded again (keys sorted), with
// a request state masked.
func postFront(t *testing.T, base, token, version, name, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+MCPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", version)
	if version >= newProtocol {
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if len(data) != 1 {
		t.Fatalf("%d events: %q", len(data), data)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(data[0]), &v); err != nil {
		t.Fatal(err)
	}
	if r, ok := v["result"].(map[string]any); ok && r["requestState"] != nil {
		r["requestState"] = "masked"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestR7ListenPlainFrameIsTheSDKsBytes: the answer the front writes
// straight for the gateway's plain result (mcpfront.PlainFrame, issue 49)
// is the one its SDK encoders write (encodedAnswer: the result's
// MarshalJSON, the server's info in _meta and resultType at 2026-07-28,
// EncodeMessage) byte for byte, for texts each encoder spells its own way,
// errors, both versions and ids of each kind; an id EncodeMessage would
// spell otherwise (a string with <, > or &), a result of another shape or
// none is left to the SDK's encoders.
func TestR7ListenPlainFrameIsTheSDKsBytes(t *testing.T) {
	f := &front{o: Options{Version: "v1 <&> é"}}
	texts := []string{"hello", "", "a <b> & \"c\" \\ d", "line\u2028sep\u2029", "bad \xff utf-8", "tab\tnl\n\x00\x1f", "é 日本 😀"}
	ids := []any{float64(1), float64(0), float64(-7), float64(1 << 40), "a", "x\"y", "é"}
	plain := func(text string, isError bool) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
	}
	for _, text := range texts {
		for _, isError := range []bool{false, true} {
			for _, newer := range []bool{false, true} {
				for _, raw := range ids {
					id, err := jsonrpc.MakeID(raw)
					if err != nil {
						t.Fatal(err)
					}
					got, ok := mcpfront.PlainFrame(id, plain(text, isError), f.serverInfo(), newer)
					want := f.encodedAnswer(id, plain(text, isError), nil, newer)
					if !ok || string(got) != string(want) {
						t.Errorf("%q error %v newer %v id %v (ok %v):\n  plain %s\n    SDK %s", text, isError, newer, raw, ok, got, want)
					}
				}
			}
		}
	}
	id, _ := jsonrpc.MakeID("a<b")
	if b, ok := mcpfront.PlainFrame(id, plain("m", false), f.serverInfo(), true); ok {
		t.Errorf("an id the encoder spells otherwise was framed here: %s", b)
	}
	one, _ := jsonrpc.MakeID(float64(1))
	for note, res := range map[string]*mcp.CallToolResult{
		"none":               nil,
		"its own _meta":      {Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "m"}}},
		"structured content": {StructuredContent: map[string]any{"a": 1}, Content: []mcp.Content{&mcp.TextContent{Text: "m"}}},
		"two contents":       {Content: []mcp.Content{&mcp.TextContent{Text: "m"}, &mcp.TextContent{Text: "n"}}},
		"annotations":        {Content: []mcp.Content{&mcp.TextContent{Text: "m", Annotations: &mcp.Annotations{Priority: 1}}}},
	} {
		if b, ok := mcpfront.PlainFrame(one, res, f.serverInfo(), true); ok {
			t.Errorf("%s: framed here: %s", note, b)
		}
	}
}

// BenchmarkListenAnswerEncoding times an Echo's answer over HTTP at
// 2026-07-28 written straight (mcpfront.PlainFrame) and through the SDK's
// encoders (encodedAnswer) in one loop; straight/sdk is their ratio.
func BenchmarkListenAnswerEncoding(b *testing.B) {
	f := &front{o: Options{Version: "v1"}}
	id, _ := jsonrpc.MakeID(float64(7))
	echo := []mcp.Content{&mcp.TextContent{Text: "hello"}}
	ways := [2]func() bool{
		func() bool {
			_, ok := mcpfront.PlainFrame(id, &mcp.CallToolResult{Content: echo}, f.serverInfo(), true)
			return ok
		},
		func() bool { return len(f.encodedAnswer(id, &mcp.CallToolResult{Content: echo}, nil, true)) > 0 },
	}
	var took [2]time.Duration
	for b.Loop() {
		for i, way := range ways {
			t0 := time.Now()
			if !way() {
				b.Fatalf("way %d wrote nothing", i)
			}
			took[i] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "straight-ns/op")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "sdk-ns/op")
	b.ReportMetric(float64(took[0])/float64(took[1]), "straight/sdk")
}
