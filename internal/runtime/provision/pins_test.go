package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestS3PinDigest: a pin is the digest of the definition it holds; a tool
// with neither title nor output schema keeps the digest pins had before
// they held definitions, so that upgrading withholds nothing; a change of
// any reviewed member (title and output schema included) changes it.
func TestS3PinDigest(t *testing.T) {
	yes := true
	base := func() *mcp.Tool {
		return &mcp.Tool{Name: "write_file", Description: "Writes a file.", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}, Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}
	}
	// The digest as the first pins computed it.
	old := func(t *mcp.Tool) string {
		b, _ := json.Marshal(map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema, "annotations": t.Annotations})
		var v any
		_ = json.Unmarshal(b, &v)
		b, _ = json.Marshal(v)
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, tc := range []struct {
		note string
		tool func() *mcp.Tool
	}{
		{"annotations", base},
		{"no annotations", func() *mcp.Tool { t := base(); t.Annotations = nil; return t }},
		{"no description", func() *mcp.Tool { t := base(); t.Description = ""; return t }},
	} {
		if got, want := PinOf(tc.tool()), old(tc.tool()); got != want {
			t.Errorf("%s: the pin is %s, the first pins had %s", tc.note, got, want)
		}
		def, digest := PinnedDefinition(tc.tool())
		sum := sha256.Sum256(def)
		if digest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("%s: the digest is not that of the definition pinned: %s", tc.note, def)
		}
	}
	for _, tc := range []struct {
		note   string
		change func(*mcp.Tool)
	}{
		{"title", func(t *mcp.Tool) { t.Title = "Write" }},
		{"output schema", func(t *mcp.Tool) { t.OutputSchema = map[string]any{"type": "object"} }},
		{"annotation", func(t *mcp.Tool) { t.Annotations.DestructiveHint = &yes }},
		{"schema", func(t *mcp.Tool) { t.InputSchema.(map[string]any)["required"] = []any{"path"} }},
	} {
		changed := base()
		tc.change(changed)
		if PinOf(changed) == PinOf(base()) {
			t.Errorf("a change of the %s leaves the pin as it was", tc.note)
		}
	}
}
