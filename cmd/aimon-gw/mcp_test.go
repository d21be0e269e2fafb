package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServesTheSurfacesTools drives `aimon-gw mcp` with the SDK's own
// client: the tool list is the surface's (rule P9), and refusals are tool
// errors with the gateway's sentences, not protocol errors.
func TestMCPServesTheSurfacesTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serverT, clientT := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, mcpParams{Surface: "agent", Workdir: t.TempDir(), Transport: serverT, Log: discard})
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	session, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	list, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "Echo,Glob,Grep,Read" {
		t.Errorf("tools = %s", got)
	}
	tests := []struct {
		name    string
		args    map[string]any
		text    string
		isError bool
	}{
		{"Echo", map[string]any{"message": "hi ", "times": 2}, "hi hi ", false},
		{"Read", map[string]any{"file_paht": "x"}, "Missing required parameter 'file_path'.", true},
		{"Bash", map[string]any{"command": "true"}, "Unknown tool 'Bash'.", true},
	}
	for _, tt := range tests {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tt.name, Arguments: tt.args})
		if err != nil {
			// The SDK refuses a call to a tool it does not list; that is a
			// protocol error by design, and the gateway never sees it.
			if tt.name == "Bash" && strings.Contains(err.Error(), "Bash") {
				continue
			}
			t.Fatalf("%s: %v", tt.name, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError != tt.isError || !strings.Contains(text, tt.text) {
			t.Errorf("%s: got %q (isError %v), want %q (isError %v)", tt.name, text, res.IsError, tt.text, tt.isError)
		}
	}
	session.Close()
	cancel()
	<-done
}

// TestMCPFollowsPolicyEdits: the MCP tool list follows a policy edit
// (rule R3) without a new session.
func TestMCPFollowsPolicyEdits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cue.mod", "module.cue"), "module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n")
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+`agent: "allowed-tools": ["Echo", "Glob"]`+"\n")
	serverT, clientT := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, mcpParams{Policy: dir, Surface: "agent", Workdir: t.TempDir(), Transport: serverT, Log: discard})
	}()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func() string {
		list, err := session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, tool := range list.Tools {
			ns = append(ns, tool.Name)
		}
		return strings.Join(ns, ",")
	}
	if got := names(); got != "Echo,Glob" {
		t.Fatalf("tools at start: %s", got)
	}
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+`agent: "allowed-tools": ["Glob"]`+"\n")
	for names() != "Glob" {
		if ctx.Err() != nil {
			t.Fatalf("the tool list never followed the edit: %s", names())
		}
		time.Sleep(20 * time.Millisecond)
	}
	session.Close()
	cancel()
	<-done
}
