package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP is the tool as MCP lists it, in the MCP server and in list_tools
// format "mcp" alike: its title, schemas, and the
// annotations its side effect (rule P13) and declarations give.
func (d ToolDef) MCP() (*mcp.Tool, error) {
	var in map[string]any
	if err := json.Unmarshal(d.InputSchema, &in); err != nil || in == nil {
		return nil, fmt.Errorf("its input schema is not a JSON object: %v", err)
	}
	in["type"] = "object" // every input is an object; MCP requires it be said
	t := &mcp.Tool{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: in,
		Annotations: annotations(d)}
	if d.OutputSchema != nil {
		var out map[string]any
		if err := json.Unmarshal(d.OutputSchema, &out); err != nil {
			return nil, fmt.Errorf("its output schema is not a JSON object: %v", err)
		}
		delete(out, "$schema")
		t.OutputSchema = out
	}
	return t, nil
}

// annotations: readOnlyHint for none and read, destructiveHint for
// destructive (rule P13); idempotentHint and openWorldHint as declared.
func annotations(d ToolDef) *mcp.ToolAnnotations {
	readOnly := d.Effect == "none" || d.Effect == "read"
	destructive := d.Effect == "destructive"
	open := d.OpenWorld
	return &mcp.ToolAnnotations{Title: d.Title, ReadOnlyHint: readOnly, DestructiveHint: &destructive,
		IdempotentHint: d.Idempotent, OpenWorldHint: &open}
}
