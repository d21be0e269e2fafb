package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/rule"
)

// A Pin is what pins.cue holds of one upstream tool (aimon-gw pin): the
// digest of its reviewed definition and, written since pins became a
// lockfile, the definition itself, so that vet, check and the hook decide
// from it without starting the server.
type Pin struct {
	SHA256 string
	// Definition is the tool as its server listed it when it was pinned,
	// as JSON (name, description, inputSchema, annotations, and title and
	// outputSchema when it has them); nil when the pins hold only its
	// digest (pins written before the definitions were).
	Definition json.RawMessage
	Pos        Position
}

// definitionKeys are the members of a tool's definition that a pin holds;
// the last two only when the tool has them, so that the digest of a tool
// without them is what it was before they were pinned.
var definitionKeys = []string{"name", "description", "inputSchema", "annotations", "title", "outputSchema"}

// PinnedDefinition is the part of an MCP tool definition (as JSON) that a
// pin reviews, as canonical JSON (keys sorted at every depth), and its
// digest.
func PinnedDefinition(tool []byte) (def []byte, digest string, err error) {
	var m map[string]any
	if err := json.Unmarshal(tool, &m); err != nil {
		return nil, "", fmt.Errorf("the tool definition is not a JSON object: %v", err)
	}
	kept := map[string]any{}
	for i, k := range definitionKeys {
		v, ok := m[k]
		switch {
		case k == "description" && v == nil:
			kept[k] = "" // as the SDK's Tool has it
		case i < 4:
			kept[k] = v // nil when absent: null, as the first pins had it
		case ok && v != nil && v != "":
			kept[k] = v
		}
	}
	def, err = json.Marshal(kept)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(def)
	return def, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// pins reads pins.SERVER: each tool's digest, and its definition where
// the pins hold it. A definition that is not the one its digest names (an
// edit by hand) is an error: what vet and check decide from would not be
// what serve holds the server to.
func (c *compiler) pins(server string) map[string]Pin {
	if p, ok := c.pinsOf[server]; ok {
		return p
	}
	if c.pinsOf == nil {
		c.pinsOf = map[string]map[string]Pin{}
	}
	var out map[string]Pin
	iter, _ := c.root.LookupPath(cue.MakePath(cue.Str("pins"), cue.Str(server))).Fields()
	for iter.Next() {
		tool, v := iter.Selector().Unquoted(), iter.Value()
		p := Pin{Pos: c.pos(v, 0)}
		if v.IncompleteKind() == cue.StringKind {
			p.SHA256 = str(v)
		} else {
			p.SHA256 = str(v.LookupPath(cue.ParsePath("sha256")))
			var m map[string]any
			if err := v.Decode(&m); err != nil {
				c.fail(v, rule.S3, "pins.%s.%s cannot be read: %v; run aimon-gw pin again.", server, tool, err)
				continue
			}
			delete(m, "sha256")
			m["name"] = tool
			b, _ := json.Marshal(m)
			def, digest, _ := PinnedDefinition(b)
			if digest != p.SHA256 {
				c.fail(v, rule.S3, "the definition pinned for %s__%s is not the one its sha256 names (%s, not %s): pins.cue was edited by hand; run aimon-gw pin again and review what it writes.", server, tool, digest, p.SHA256)
				continue
			}
			p.Definition = def
		}
		if out == nil {
			out = map[string]Pin{}
		}
		out[tool] = p
	}
	c.pinsOf[server] = out
	return out
}

// PinnedTools are the names of the tools the server's pins list, sorted.
func (u *Upstream) PinnedTools() []string { return slices.Sorted(maps.Keys(u.Pins)) }
