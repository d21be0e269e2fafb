// Command embed loads a policy through aimon-gw's public packages, decides
// each call it reads (tool_use blocks, one a line) with gateway.Decide,
// and calls it again through gateway.Middleware in front of a go-sdk
// server of its own, over an in-memory transport; it prints one JSON line
// a call: the decision, and what the server's client got.
//
//	embed POLICY-DIR WORKDIR < calls.jsonl
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/policy"
)

type line struct {
	ID       string           `json:"id"`
	Decision gateway.Decision `json:"decision"`
	// Server is what the go-sdk client got through the middleware.
	ServerText  string `json:"server_text"`
	ServerError bool   `json:"server_error"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(2)
	}
}

func run() error {
	if len(os.Args) != 3 {
		return fmt.Errorf("usage: embed POLICY-DIR WORKDIR < calls.jsonl")
	}
	ctx := context.Background()
	pol, err := policy.Load(ctx, os.Args[1], policy.WithWorkdir(os.Args[2]))
	if err != nil {
		return err
	}
	gw, err := gateway.New(pol, gateway.Options{})
	if err != nil {
		return err
	}
	defer gw.Close()

	// The team's own server: every tool the policy defines, answering
	// "ran NAME", behind the gateway.
	server := mcp.NewServer(&mcp.Implementation{Name: "team"}, nil)
	for _, name := range pol.Tools() {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil
		})
	}
	server.AddReceivingMiddleware(gw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		return err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return err
	}
	defer cs.Close()

	sc := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var b struct {
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			return fmt.Errorf("a call line: %w", err)
		}
		out := line{ID: b.ID, Decision: gw.Decide(ctx, gateway.Call{ID: b.ID, Name: b.Name, Input: b.Input})}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: b.Name, Arguments: b.Input})
		if err != nil {
			return fmt.Errorf("call %s through the middleware: %w", b.ID, err)
		}
		if len(r.Content) > 0 {
			if t, ok := r.Content[0].(*mcp.TextContent); ok {
				out.ServerText = t.Text
			}
		}
		out.ServerError = r.IsError
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return sc.Err()
}
