// Package geminicli drives the real Gemini CLI (gemini -p) against a
// scripted Gemini API (streamGenerateContent) on 127.0.0.1, so that a
// test sees what Gemini CLI itself does with the hook's answers and with
// aimon-gw's MCP tools: the files it writes, the commands it runs, the
// function responses it sends the model back (issue 43).
package geminicli

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
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/scripted"
)

// Call is one function call the scripted model makes: Name is the tool as
// Gemini CLI declares it to the model (run_shell_command, write_file,
// mcp_aimon_Echo), Args its arguments.
type Call struct {
	Name string
	Args map[string]any
}

// Script is what the model answers, turn by turn, in the conversation
// whose first user text holds Key: each turn's calls in one response
// (Gemini CLI runs them and sends their responses back), then a text.
type Script struct {
	Key   string
	Turns [][]Call
}

// Server is the scripted Gemini API.
type Server struct {
	URL     string
	scripts []Script
	// Record keeps the functionResponse Gemini CLI sent back for each
	// call id, as JSON (Said), and the functions it declared.
	scripted.Record
}

// Serve starts the server on 127.0.0.1; it stops when the test ends.
func Serve(t testing.TB, scripts ...Script) *Server {
	t.Helper()
	s := &Server{scripts: scripts}
	s.URL = scripted.Serve(t, http.HandlerFunc(s.serve))
	return s
}

// ID is the call id of the script's turn-th turn's i-th call.
func ID(key string, turn, i int) string { return fmt.Sprintf("call_%s_%d_%d", key, turn, i) }

type part struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []part `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil && r.Method == http.MethodPost {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, ":countTokens"):
		io.WriteString(w, `{"totalTokens":1}`)
		return
	case !strings.Contains(r.URL.Path, ":streamGenerateContent") && !strings.Contains(r.URL.Path, ":generateContent"):
		io.WriteString(w, `{}`)
		return
	}
	var tools []string
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			tools = append(tools, f.Name)
		}
	}
	// The conversation's turn is the number of the model's turns with
	// calls; its key is in the user's texts.
	turn, users := 0, ""
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				s.Keep(p.FunctionResponse.ID, string(p.FunctionResponse.Response))
			case p.Text != "" && c.Role == "user":
				users += p.Text + "\n"
			}
		}
		if c.Role == "model" && slices.ContainsFunc(c.Parts, func(p part) bool { return p.FunctionCall != nil }) {
			turn++
		}
	}
	s.Offered(tools)
	var calls []Call
	key := ""
	if len(tools) > 0 {
		for _, sc := range s.scripts {
			if strings.Contains(users, sc.Key) && len(sc.Key) >= len(key) {
				key, calls = sc.Key, nil
				if turn < len(sc.Turns) {
					calls = sc.Turns[turn]
				}
			}
		}
	}
	var parts []map[string]any
	for i, c := range calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": ID(key, turn, i), "name": c.Name, "args": c.Args}})
	}
	if len(parts) == 0 {
		parts = append(parts, map[string]any{"text": "done"})
	}
	chunk := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
		"modelVersion":  "gemini-2.5-pro",
	}
	b, _ := json.Marshal(chunk)
	if !strings.Contains(r.URL.Path, ":streamGenerateContent") {
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "data: %s\r\n\r\n", b)
	bw.Flush()
}

// Run is one gemini -p run in Project under its own HOME.
type Run struct {
	Gemini        string
	Project, Home string
	Prompt        string
	// Settings is ~/.gemini/settings.json besides the scripted model's
	// auth, which Start adds: the hooks and MCP servers of the run; nil
	// keeps the settings.json a run before left.
	Settings map[string]any
	// Args are gemini's flags besides -p.
	Args []string
	// Env is added to the run's environment.
	Env []string
}

// Start writes settings.json and runs Gemini CLI to its end (bounded by
// ctx), standard input closed; it returns what Gemini CLI printed.
func (r Run) Start(ctx context.Context, s *Server) (string, error) {
	dir := filepath.Join(r.Home, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if r.Settings != nil {
		settings := maps.Clone(r.Settings)
		settings["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
		b, _ := json.MarshalIndent(settings, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "settings.json"), b, 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.CommandContext(ctx, r.Gemini, append(append([]string{}, r.Args...), "-p", r.Prompt)...)
	cmd.Dir = r.Project
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GEMINI") || strings.HasPrefix(kv, "GOOGLE")
	})
	cmd.Env = append(env, "HOME="+r.Home, "GOOGLE_GEMINI_BASE_URL="+s.URL, "GEMINI_API_KEY=test-0000",
		"GEMINI_CLI_NO_RELAUNCH=true", "NO_COLOR=1", "TERM=dumb")
	cmd.Env = append(cmd.Env, r.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// Find is the CLI at path, or a skip, or under CI a failure.
func Find(t testing.TB, path string) string { return scripted.Find(t, "Gemini CLI", path) }
