// Package geminihook decides Gemini CLI's own tool calls as its BeforeTool
// hook, with the same policy and the same decision as Claude Code's hook
// (cchook): the input is read as a PreToolUse input under Gemini's tool
// names (schema/geminicli), its MCP tools as mcp__SERVER__TOOL, and the
// answer is Gemini's: decision allow, ask or deny, with the whole input
// to run when it differs from the one sent (Gemini builds the call from
// it). Gemini takes any exit but 0 and 2 as a warning and runs the tool,
// so the command exits 2 on any failure of its own.
package geminihook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/jsontok"
	"aimon.dev/gw/internal/core/jsonwords"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
)

// Runtime is Gemini CLI's name among the hooks.
const Runtime = "gemini-cli"

// Shell is Gemini CLI's shell tool, whose command is wrapped in the sandbox.
const Shell = "run_shell_command"

// Input is a BeforeTool hook input as Gemini CLI sends it.
type Input struct {
	SessionID string          `json:"session_id"`
	Cwd       string          `json:"cwd"`
	Event     string          `json:"hook_event_name"`
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	// ToolResponse is an AfterTool input's result of the call.
	ToolResponse json.RawMessage `json:"tool_response"`
	MCPContext   *struct {
		Server string `json:"server_name"`
		Tool   string `json:"tool_name"`
	} `json:"mcp_context"`
}

// AfterTool is Gemini CLI's event whose input carries a tool's result: it
// labels the session (rule P18), read as cchook's PostToolUse.
const AfterTool = "AfterTool"

// ReadInput reads a BeforeTool input as the PreToolUse input it decides,
// and an AfterTool input as the PostToolUse input that labels the session.
// An error is a sentence saying why the call is blocked.
func ReadInput(data []byte) (cchook.Input, error) {
	g, err := readInput(data)
	if err != nil {
		// json v2 reads it again for the words of what is wrong.
		g = Input{}
		if err = jsonv2.Unmarshal(data, &g); err == nil { // exactly, as cchook reads
			err = errors.New("it cannot be read token by token")
		}
		return cchook.Input{}, fmt.Errorf("the hook input is not a Gemini CLI BeforeTool input that can be read one way only (%s); the call is blocked.", jsonwords.Problem(err))
	}
	if g.ToolName == "" {
		return cchook.Input{}, errors.New(`the hook input has no "tool_name" (names are read exactly as Gemini CLI writes them); the call is blocked.`)
	}
	if g.Event != "BeforeTool" && g.Event != AfterTool {
		return cchook.Input{}, fmt.Errorf("the hook input is for Gemini CLI's %q event, and aimon-gw hook gemini-cli answers only BeforeTool and AfterTool; the call is blocked. Configure it under hooks.BeforeTool (and hooks.AfterTool, whose results label the session) in Gemini CLI's settings.json.", g.Event)
	}
	if g.Cwd == "" || !filepath.IsAbs(g.Cwd) {
		return cchook.Input{}, fmt.Errorf("the hook input's cwd %q is not an absolute directory, so the paths of the call cannot be read as Gemini CLI reads them; the call is blocked.", g.Cwd)
	}
	name := g.ToolName
	if c := g.MCPContext; c != nil && c.Server != "" && c.Tool != "" {
		// Gemini's mcp_SERVER_TOOL cannot be split where names hold
		// underscores; its context names both.
		name = "mcp__" + c.Server + "__" + c.Tool
	}
	in := cchook.Input{SessionID: g.SessionID, Cwd: g.Cwd, HookEventName: "PreToolUse", ToolName: name, ToolInput: g.ToolInput}
	if g.Event == AfterTool {
		in.HookEventName, in.ToolResponse = cchook.PostToolUse, g.ToolResponse
	}
	// cchook's check of the cwd (a directory) is the same; the rest of
	// its reading holds for in as made here. Not by encoding in and
	// reading it again: each process built encoding/json's encoder and
	// json v2's decoder of cchook.Input for it (issue 43).
	if err := cchook.CheckCwd(in.Cwd); err != nil {
		return cchook.Input{}, err
	}
	return in, nil
}

// Output is the answer Gemini CLI reads.
type Output struct {
	Decision           string    `json:"decision"`
	Reason             string    `json:"reason,omitempty"`
	HookSpecificOutput *Specific `json:"hookSpecificOutput,omitempty"`
}

// Specific carries the input Gemini CLI runs instead of the one it sent.
type Specific struct {
	HookEventName string         `json:"hookEventName"`
	ToolInput     map[string]any `json:"tool_input"`
}

// Answer answers one input by cchook's decision, the shell wrapped in
// aimon-gw exec by wrap (nil: as sent), and answers it as Gemini reads it.
func Answer(gen *provision.Generation, in cchook.Input, opts gateway.Options, wrap *cchook.Wrap) Output {
	if in.ToolName == Shell && in.Unread == "" {
		var args struct {
			Dir string `json:"dir_path"`
		}
		if json.Unmarshal(in.ToolInput, &args) == nil && args.Dir != "" && filepath.Clean(args.Dir) != filepath.Clean(in.Cwd) && filepath.Join(in.Cwd, args.Dir) != filepath.Clean(in.Cwd) {
			// The command is decided, and kept in its sandbox, in the
			// working directory: run elsewhere, its relative paths would
			// name what was not decided. Refused, and recorded, by the one
			// decision (R7).
			in.Unread = fmt.Sprintf("run_shell_command with dir_path %q is refused: aimon-gw decides a command in the working directory %s. Send it without dir_path, naming the directory in its paths.", args.Dir, in.Cwd)
		}
	}
	// Its own files, which make it call the hook, are protected from
	// its tools and, through exec, its commands by the decision (rule R9).
	if wrap != nil {
		w := *wrap
		w.Shell, w.Runtime = Shell, Runtime
		wrap = &w
	}
	d := cchook.Answer(Runtime, gen, in, opts, wrap).HookSpecificOutput
	out := Output{Decision: d.PermissionDecision, Reason: d.PermissionDecisionReason}
	if d.PermissionDecision == "deny" {
		return out
	}
	if d.UpdatedInput != nil {
		out.HookSpecificOutput = &Specific{HookEventName: "BeforeTool", ToolInput: d.UpdatedInput}
	}
	if d.PermissionDecision == "allow" {
		out.Reason = ""
	}
	return out
}

// readInput reads a hook input as json v2 reads it into an Input, token
// by token (package jsontok), as cchook reads Claude Code's: json v2's
// reflection built Input's decoder in every hook process (issue 43). Any
// error is ReadInput's cue to read it with json v2, whose words it gives.
func readInput(data []byte) (Input, error) {
	var g Input
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "session_id":
			return jsontok.String(dec, &g.SessionID)
		case "cwd":
			return jsontok.String(dec, &g.Cwd)
		case "hook_event_name":
			return jsontok.String(dec, &g.Event)
		case "tool_name":
			return jsontok.String(dec, &g.ToolName)
		case "tool_input":
			return jsontok.Raw(dec, &g.ToolInput)
		case "tool_response":
			return jsontok.Raw(dec, &g.ToolResponse)
		case "mcp_context":
			if dec.PeekKind() == 'n' {
				g.MCPContext = nil
				_, err := dec.ReadToken()
				return err
			}
			c := &struct {
				Server string `json:"server_name"`
				Tool   string `json:"tool_name"`
			}{}
			g.MCPContext = c
			_, err := jsontok.Object(dec, func(name string) error {
				switch name {
				case "server_name":
					return jsontok.String(dec, &c.Server)
				case "tool_name":
					return jsontok.String(dec, &c.Tool)
				}
				return dec.SkipValue()
			})
			return err
		}
		return dec.SkipValue() // a name of Gemini CLI's the hook does not read
	})
	if err == nil {
		err = jsontok.End(dec, "hook input")
	}
	return g, err
}
