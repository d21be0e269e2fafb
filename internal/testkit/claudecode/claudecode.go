// Package claudecode drives the real Claude Code CLI (claude -p) against a
// scripted Messages API on 127.0.0.1, so that a test sees what Claude Code
// itself does with the hook's decisions: the files it writes, the commands
// it runs (issue 42).
package claudecode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/scripted"
)

// Use is one tool call the scripted model makes.
type Use struct {
	Tool  string
	Input map[string]any
}

// Script is what the model answers, turn by turn, in the conversation
// whose first prompt holds Key: each turn's calls in one message (Claude
// Code runs them and sends their results back), then a final text. A
// subagent's conversation is one of its own, found by its prompt's key.
type Script struct {
	Key   string
	Turns [][]Use
}

// Server is the scripted Messages API.
type Server struct {
	URL     string
	scripts []Script

	mu      sync.Mutex
	results map[string]string // tool_use id → the result Claude Code sent
}

// Serve starts the server on 127.0.0.1; it stops when the test ends.
func Serve(t testing.TB, scripts ...Script) *Server {
	t.Helper()
	s := &Server{scripts: scripts, results: map[string]string{}}
	s.URL = scripted.Serve(t, http.HandlerFunc(s.serve))
	return s
}

// Result is what Claude Code sent back for the call of id: the tool's
// output or the hook's refusal; "" when it sent nothing.
func (s *Server) Result(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results[id]
}

// Results are all the results Claude Code sent back, by tool_use id.
func (s *Server) Results() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.results)
}

// ID is the tool_use id of the script's turn-th turn's i-th call.
func ID(key string, turn, i int) string {
	return fmt.Sprintf("toolu_%s_%d_%d", strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, key), turn, i)
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func blocks(raw json.RawMessage) []block {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []block{{Type: "text", Text: text}}
	}
	var bs []block
	json.Unmarshal(raw, &bs)
	return bs
}

func (b block) result() string {
	var text string
	if json.Unmarshal(b.Content, &text) == nil {
		return text
	}
	var parts []block
	json.Unmarshal(b.Content, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":1}`)
		return
	}
	var req struct {
		Messages []message        `json:"messages"`
		Tools    []map[string]any `json:"tools"`
		Stream   bool             `json:"stream"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	turn, first := 0, ""
	for i, m := range req.Messages {
		bs := blocks(m.Content)
		if m.Role == "assistant" {
			turn++
			continue
		}
		for _, b := range bs {
			switch {
			case b.Type == "tool_result":
				s.mu.Lock()
				s.results[b.ToolUseID] = b.result()
				s.mu.Unlock()
			case b.Type == "text" && i == 0:
				first += b.Text + "\n"
			}
		}
	}
	var uses []Use
	key := ""
	if len(req.Tools) > 0 {
		// The deepest key wins: a subagent's prompt may quote its parent's.
		for _, sc := range s.scripts {
			if strings.Contains(first, sc.Key) && len(sc.Key) >= len(key) {
				key = sc.Key
				uses = nil
				if turn < len(sc.Turns) {
					uses = sc.Turns[turn]
				}
			}
		}
	}
	content := []map[string]any{}
	stop := "end_turn"
	for i, u := range uses {
		content = append(content, map[string]any{"type": "tool_use", "id": ID(key, turn, i), "name": u.Tool, "input": u.Input})
		stop = "tool_use"
	}
	if len(uses) == 0 {
		content = append(content, map[string]any{"type": "text", "text": "done"})
	}
	msg := map[string]any{"id": fmt.Sprintf("msg_%s_%d", key, turn), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 1, "output_tokens": 1}}
	if !req.Stream {
		msg["content"], msg["stop_reason"] = content, stop
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	// Claude Code waits on a kept-alive stream otherwise.
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Connection", "close")
	bw := bufio.NewWriter(w)
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", name, b)
	}
	msg["content"] = []any{}
	event("message_start", map[string]any{"message": msg})
	for i, c := range content {
		if c["type"] == "tool_use" {
			in, _ := json.Marshal(c["input"])
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		} else {
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}})
	event("message_stop", map[string]any{})
	bw.Flush()
}

// Run is one claude -p run in project under its own HOME.
type Run struct {
	// Claude is the CLI; Hook the command line of the PreToolUse hook,
	// written into the project's .claude/settings.json.
	Claude, Hook string
	// PostToolUse makes Hook Claude Code's PostToolUse hook as well, whose
	// inputs carry the results that label a session.
	PostToolUse bool
	// UserPromptSubmit makes Hook Claude Code's UserPromptSubmit hook as
	// well, whose inputs carry the user's prompt.
	UserPromptSubmit bool
	Project, Home    string
	Prompt           string
	// Env is added to the run's environment.
	Env []string
	// Settings are written into .claude/settings.json beside the hook
	// (Claude Code's own permissions, to compare with the hook's); with
	// no Hook they are the whole settings.
	Settings map[string]any
	// MCPServers are given to Claude Code with --mcp-config, as its
	// mcpServers (a name to {"command": ..., "args": [...]}).
	MCPServers map[string]any
}

// Start writes the settings and runs Claude Code to its end (bounded by
// ctx); it returns what Claude Code printed.
func (r Run) Start(ctx context.Context, s *Server) (string, error) {
	settings := maps.Clone(r.Settings)
	if settings == nil {
		settings = map[string]any{}
	}
	if r.Hook != "" {
		hook := []any{map[string]any{"matcher": "*", "hooks": []any{map[string]any{"type": "command", "command": r.Hook, "timeout": 60}}}}
		hooks := map[string]any{"PreToolUse": hook}
		if r.PostToolUse {
			hooks["PostToolUse"] = hook
		}
		if r.UserPromptSubmit {
			// An event without tools takes no matcher.
			hooks["UserPromptSubmit"] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": r.Hook, "timeout": 60}}}}
		}
		settings["hooks"] = hooks
	}
	if err := writeJSON(filepath.Join(r.Project, ".claude", "settings.json"), settings); err != nil {
		return "", err
	}
	state := map[string]any{"hasCompletedOnboarding": true, "bypassPermissionsModeAccepted": true,
		"projects": map[string]any{r.Project: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}}
	if err := writeJSON(filepath.Join(r.Home, ".claude.json"), state); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(r.Home, "tmp"), 0o755); err != nil {
		return "", err
	}
	args := []string{"-p", r.Prompt, "--output-format", "text", "--max-turns", "30"}
	if r.MCPServers != nil {
		mcp := filepath.Join(r.Home, "mcp.json")
		if err := writeJSON(mcp, map[string]any{"mcpServers": r.MCPServers}); err != nil {
			return "", err
		}
		args = append(args, "--mcp-config", mcp, "--strict-mcp-config")
	}
	cmd := exec.CommandContext(ctx, r.Claude, args...)
	cmd.Dir = r.Project
	// Claude Code's own variables are the run's, not the test's.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CLAUDE") || strings.HasPrefix(kv, "ANTHROPIC") })
	cmd.Env = append(env, "HOME="+r.Home, "ANTHROPIC_BASE_URL="+s.URL, "ANTHROPIC_API_KEY=sk-ant-test-0000000000000000",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"XDG_CONFIG_HOME="+filepath.Join(r.Home, ".config"),
		// Claude Code keeps its shell's state in TMPDIR/claude-UID.
		"TMPDIR="+filepath.Join(r.Home, "tmp"))
	if os.Geteuid() == 0 {
		cmd.Env = append(cmd.Env, "IS_SANDBOX=1")
	}
	cmd.Env = append(cmd.Env, r.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return os.WriteFile(path, b, 0o644)
}

// Find is the CLI at path, or a skip, or under CI a failure.
func Find(t testing.TB, path string) string { return scripted.Find(t, "Claude Code", path) }
