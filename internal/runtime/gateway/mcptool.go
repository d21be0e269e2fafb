package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
	desc := d.Description
	if d.DescribeBounds {
		if b := bounds(in); b != "" {
			desc = strings.TrimSpace(desc + "\n\nBounds the gateway enforces: " + b + ".")
		}
	}
	t := &mcp.Tool{Name: d.Name, Title: d.Title, Description: desc, InputSchema: in,
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

// bounds says, one clause a parameter, the bounds of schema's properties
// that the gate enforces and that some clients (Codex) drop from the
// schema they show the model: "times from 1 to 5; name at most 64
// characters". Nested objects and array items are named by their path.
func bounds(schema map[string]any) string {
	var clauses []string
	var walk func(path string, s map[string]any, depth int)
	walk = func(path string, s map[string]any, depth int) {
		if depth > 4 || s == nil {
			return
		}
		if path != "" {
			if c := boundsOf(s); c != "" {
				clauses = append(clauses, path+" "+c)
			}
		}
		props, _ := s["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			sub, _ := props[name].(map[string]any)
			p := name
			if path != "" {
				p = path + "." + name
			}
			walk(p, sub, depth+1)
		}
		if items, ok := s["items"].(map[string]any); ok && path != "" {
			walk(path+"[]", items, depth+1)
		}
	}
	walk("", schema, 0)
	return strings.Join(clauses, "; ")
}

// boundsOf is the clause of one schema's own bounds, "" for none.
func boundsOf(s map[string]any) string {
	num := func(k string) (string, bool) {
		v, ok := s[k].(float64)
		if !ok {
			return "", false
		}
		return fmt.Sprint(v), true
	}
	var parts []string
	lo, hasLo := num("minimum")
	hi, hasHi := num("maximum")
	switch {
	case hasLo && hasHi:
		parts = append(parts, "from "+lo+" to "+hi)
	case hasLo:
		parts = append(parts, "at least "+lo)
	case hasHi:
		parts = append(parts, "at most "+hi)
	}
	if v, ok := num("exclusiveMinimum"); ok {
		parts = append(parts, "more than "+v)
	}
	if v, ok := num("exclusiveMaximum"); ok {
		parts = append(parts, "less than "+v)
	}
	if v, ok := num("multipleOf"); ok {
		parts = append(parts, "a multiple of "+v)
	}
	for _, k := range [][3]string{{"minLength", "maxLength", "characters"}, {"minItems", "maxItems", "items"}, {"minProperties", "maxProperties", "entries"}} {
		lo, hasLo := num(k[0])
		hi, hasHi := num(k[1])
		switch {
		case hasLo && hasHi:
			parts = append(parts, lo+" to "+hi+" "+k[2])
		case hasLo:
			parts = append(parts, "at least "+lo+" "+k[2])
		case hasHi:
			parts = append(parts, "at most "+hi+" "+k[2])
		}
	}
	if p, ok := s["pattern"].(string); ok {
		parts = append(parts, "matching the pattern "+p)
	}
	return strings.Join(parts, ", ")
}
