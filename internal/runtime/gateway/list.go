package gateway

import (
	"bytes"
	"encoding/json"

	"aimon.dev/gw/internal/runtime/provision"
)

type toolsReply struct {
	Type   string `json:"type"`
	Format string `json:"format"`
	Tools  []any  `json:"tools"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type openaiTool struct {
	Type     string         `json:"type"`
	Function openaiFunction `json:"function"`
}

// openaiFunction is a Chat Completions function, or (flat, with Type set)
// a Responses API function tool.
type openaiFunction struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

// listTools answers list_tools with the tools the surface may use (rule
// P9). strict asks, for the OpenAI formats, for schemas OpenAI's strict mode
// accepts; a tool whose schema cannot be made so is listed with strict false.
func (g *Gateway) listTools(cur *provision.Generation, chain []string, format string, strict bool) []byte {
	if format == "" {
		format = "anthropic"
	}
	switch format {
	case "anthropic", "openai", "openai-responses", "mcp":
	default:
		return errorReply("unknown tool list format %q: use \"anthropic\", \"openai\", \"openai-responses\" or \"mcp\".", format)
	}
	defs, err := toolDefs(cur, chain)
	if err != nil {
		return errorReply("%s", err)
	}
	if format == "anthropic" {
		if b, ok := appendAnthropicTools(nil, defs); ok {
			return b
		}
	}
	reply := toolsReply{Type: "tools", Format: format, Tools: []any{}}
	for _, t := range defs {
		switch format {
		case "anthropic":
			reply.Tools = append(reply.Tools, anthropicTool{t.Name, t.Description, t.InputSchema})
		case "mcp":
			// Left out as the MCP server leaves it out.
			if m, err := t.MCP(); err == nil {
				reply.Tools = append(reply.Tools, m)
			}
		default:
			f := openaiFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}
			if strict {
				s, ok := strictSchema(t.InputSchema)
				if ok {
					f.Parameters = s
				}
				f.Strict = &ok
			}
			if format == "openai" {
				reply.Tools = append(reply.Tools, openaiTool{Type: "function", Function: f})
			} else {
				f.Type = "function"
				reply.Tools = append(reply.Tools, f)
			}
		}
	}
	return marshal(reply)
}

// appendAnthropicTools appends the tool list of defs in the anthropic form
// as marshal writes its toolsReply, byte for byte (TestR1AppendAnthropic
// ToolsIsMarshal), compacting each schema once: the tools written alike
// share one, and encoding/json compacted it again for each tool, a tenth
// of a 1,000-tool start (issue 49). False, for marshal to say why, when a
// schema is no JSON.
func appendAnthropicTools(dst []byte, defs []ToolDef) ([]byte, bool) {
	type schema struct {
		at *byte
		n  int
	}
	compacted := map[schema][]byte{}
	dst = append(dst, `{"type":"tools","format":"anthropic","tools":[`...)
	for i, t := range defs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = appendString(dst, t.Name)
		dst = append(dst, `,"description":`...)
		dst = appendString(dst, t.Description)
		dst = append(dst, `,"input_schema":`...)
		switch in := t.InputSchema; {
		case in == nil:
			dst = append(dst, "null"...)
		case len(in) == 0:
			return nil, false
		default:
			key := schema{&in[0], len(in)}
			c, ok := compacted[key]
			if !ok {
				var b bytes.Buffer
				if json.Compact(&b, in) != nil {
					return nil, false
				}
				c = b.Bytes()
				compacted[key] = c
			}
			dst = append(dst, c...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...), true
}
