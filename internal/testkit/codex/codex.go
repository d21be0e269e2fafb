// Package codex drives the real Codex CLI (codex exec) against a scripted
// Responses API on 127.0.0.1, so that a test sees what Codex itself does
// with the hook's answers and with aimon-gw's MCP tools: the files it
// writes, the commands it runs, the text it sends the model back
// (issue 43).
package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/scripted"
)

// Call is one function call the scripted model makes: Name is the tool
// as Codex offers it to the model (exec_command, apply_patch,
// mcp__aimon__Echo), Args its arguments. A tool Codex offers as a custom
// (freeform) tool, as apply_patch, takes its input as Input instead.
type Call struct {
	Name  string
	Args  map[string]any
	Input string
}

// Script is what the model answers, turn by turn, in the conversation
// whose first user message holds Key: each turn's calls in one response
// (Codex runs them and sends their outputs back), then a final text.
type Script struct {
	Key   string
	Turns [][]Call
}

// Server is the scripted Responses API.
type Server struct {
	URL     string
	scripts []Script
	// Record keeps the output Codex sent back for each call_id (Said)
	// and the tools it offered.
	scripted.Record
}

// Serve starts the server on 127.0.0.1; it stops when the test ends.
func Serve(t testing.TB, scripts ...Script) *Server {
	t.Helper()
	s := &Server{scripts: scripts}
	s.URL = scripted.Serve(t, http.HandlerFunc(s.serve)) + "/v1"
	return s
}

// ID is the call id of the script's turn-th turn's i-th call.
func ID(key string, turn, i int) string { return fmt.Sprintf("call_%s_%d_%d", key, turn, i) }

type item struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
}

// text is the text of a message's content or of a call's output, which
// Codex sends as a string or as a list of parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/responses") {
		// Codex asks for the model list and such; none is needed.
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[],"models":[]}`)
		return
	}
	var req struct {
		Input []item `json:"input"`
		Tools []struct {
			Type, Name string
		} `json:"tools"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var tools []string
	for _, t := range req.Tools {
		tools = append(tools, t.Name)
	}
	turn, users := 0, ""
	s.Offered(tools)
	for _, it := range req.Input {
		switch it.Type {
		case "function_call_output", "custom_tool_call_output":
			s.Keep(it.CallID, text(it.Output))
		case "function_call", "custom_tool_call":
		case "message", "":
			if it.Role == "user" {
				users += text(it.Content) + "\n"
			}
			if it.Role == "assistant" {
				continue
			}
		}
	}
	// A turn is one response of the model's: count the distinct responses
	// by the calls the input already holds.
	seen := map[string]bool{}
	for _, it := range req.Input {
		if it.Type == "function_call" || it.Type == "custom_tool_call" {
			if k, t, ok := parseID(it.CallID); ok && !seen[fmt.Sprint(k, t)] {
				seen[fmt.Sprint(k, t)] = true
				turn++
			}
		}
	}
	var calls []Call
	key := ""
	for _, sc := range s.scripts {
		if strings.Contains(users, sc.Key) && len(sc.Key) >= len(key) {
			key, calls = sc.Key, nil
			if turn < len(sc.Turns) {
				calls = sc.Turns[turn]
			}
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", name, b)
	}
	id := fmt.Sprintf("resp_%s_%d", key, turn)
	event("response.created", map[string]any{"response": map[string]any{"id": id}})
	var items []map[string]any
	for i, c := range calls {
		cid := ID(key, turn, i)
		it := map[string]any{"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": c.Name, "status": "completed"}
		// Codex offers an MCP server's tools as a namespace, mcp__SERVER,
		// and takes a call of one only in it.
		if rest, ok := strings.CutPrefix(c.Name, "mcp__"); ok {
			if server, tool, ok := strings.Cut(rest, "__"); ok {
				it["namespace"], it["name"] = "mcp__"+server, tool
			}
		}
		if c.Args == nil && c.Input != "" {
			it["type"], it["input"] = "custom_tool_call", c.Input
		} else {
			args, _ := json.Marshal(c.Args)
			it["arguments"] = string(args)
		}
		items = append(items, it)
	}
	if len(calls) == 0 {
		items = append(items, map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}})
	}
	for i, it := range items {
		event("response.output_item.added", map[string]any{"output_index": i, "item": it})
		event("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	event("response.completed", map[string]any{"response": map[string]any{"id": id, "output": items,
		"usage": map[string]any{"input_tokens": 1, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 1,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 2}}})
	bw.Flush()
}

func parseID(id string) (key string, turn int, ok bool) {
	rest, ok := strings.CutPrefix(id, "call_")
	if !ok {
		return "", 0, false
	}
	parts := strings.Split(rest, "_")
	if len(parts) < 3 {
		return "", 0, false
	}
	_, err := fmt.Sscan(parts[len(parts)-2], &turn)
	return strings.Join(parts[:len(parts)-2], "_"), turn, err == nil
}

// Run is one codex exec run in Project under its own CODEX_HOME (Home).
type Run struct {
	Codex         string
	Project, Home string
	Prompt        string
	// Config is config.toml's body besides the scripted model's provider
	// (Config): the hooks and MCP servers of the run; "" keeps the
	// config.toml a run before left.
	Config string
	// Args are codex exec's flags before the prompt.
	Args []string
	// Env is added to the run's environment.
	Env []string
}

// Config is config.toml for the scripted server with body (the hooks and
// MCP servers of the run) between the model's keys and the provider's
// table, so that body may hold keys of its own and tables.
func Config(s *Server, body string) string {
	return fmt.Sprintf(`model = "gpt-5.5"
model_provider = "scripted"
%s

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`, body, s.URL)
}

// Start writes config.toml (unless Config is "") and runs codex exec to its end (bounded by
// ctx), standard input closed; it returns what Codex printed.
func (r Run) Start(ctx context.Context, s *Server) (string, error) {
	if err := os.MkdirAll(r.Home, 0o755); err != nil {
		return "", err
	}
	if r.Config != "" {
		if err := os.WriteFile(filepath.Join(r.Home, "config.toml"), []byte(Config(s, r.Config)), 0o644); err != nil {
			return "", err
		}
	}
	args := append([]string{"exec", "--skip-git-repo-check", "--color", "never"}, r.Args...)
	cmd := exec.CommandContext(ctx, r.Codex, append(args, r.Prompt)...)
	cmd.Dir = r.Project
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "CODEX") || strings.HasPrefix(kv, "OPENAI")
	})
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "RUST_BACKTRACE=") })
	cmd.Env = append(env, "CODEX_HOME="+r.Home, "HOME="+filepath.Dir(r.Home), "SCRIPTED_API_KEY=sk-test-0000", "RUST_LOG=error")
	cmd.Env = append(cmd.Env, r.Env...)
	// codex exec reads a prompt from standard input while it is open.
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// Find is the CLI at path, or a skip, or under CI a failure.
func Find(t testing.TB, path string) string { return scripted.Find(t, "Codex", path) }
