package gateway

import (
	"encoding/json"
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

type mcpTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type openaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// listTools answers list_tools with the tools the surface may use (rule P9).
func (g *Gateway) listTools(cur *Current, chain []string, format string, strict bool) []byte {
	if format == "" {
		format = "anthropic"
	}
	if format != "anthropic" && format != "openai" && format != "mcp" {
		return errorReply("unknown tool list format %q: use \"anthropic\", \"openai\" or \"mcp\".", format)
	}
	defs, err := toolDefs(cur, chain)
	if err != nil {
		return errorReply("%s", err)
	}
	reply := toolsReply{Type: "tools", Format: format, Tools: []any{}}
	for _, t := range defs {
		switch format {
		case "anthropic":
			reply.Tools = append(reply.Tools, anthropicTool{t.Name, t.Description, t.InputSchema})
		case "mcp":
			reply.Tools = append(reply.Tools, mcpTool{t.Name, t.Description, t.InputSchema})
		case "openai":
			var o openaiTool
			o.Type = "function"
			o.Function.Name, o.Function.Description, o.Function.Parameters = t.Name, t.Description, t.InputSchema
			reply.Tools = append(reply.Tools, o)
		}
	}
	return marshal(reply)
}
