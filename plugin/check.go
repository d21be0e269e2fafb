package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"

	"aimon.dev/gw/plugin/pluginpb"
	"aimon.dev/gw/tools"
)

// Normalize fills the K1 defaults of a described tool (sequential,
// non_interruptible) and checks it: a valid name (rule C1), known
// declarations, and an input schema that is a JSON object. The schema is
// otherwise taken as declared (rules S3, S8). Both ends use it: Serve to
// refuse a bad definition before serving, the gateway to refuse a bad
// Describe answer.
func Normalize(t *pluginpb.ToolInfo) error {
	if !tools.ValidName(t.Name) {
		return fmt.Errorf("tool name %q is not valid: it must match ^[a-zA-Z0-9_-]{1,64}$", t.Name)
	}
	if t.Concurrency == "" {
		t.Concurrency = tools.Sequential
	}
	if t.Interrupt == "" {
		t.Interrupt = tools.NonInterruptible
	}
	switch t.Concurrency {
	case tools.Sequential, tools.ConcurrentSafe:
	default:
		return fmt.Errorf("tool %s declares concurrency %q; use %q or %q", t.Name, t.Concurrency, tools.Sequential, tools.ConcurrentSafe)
	}
	switch t.Interrupt {
	case tools.NonInterruptible, tools.Cooperative, tools.ThreadInterrupt, tools.ExternallyTerminated:
	default:
		return fmt.Errorf("tool %s declares interrupt %q; use one of %s, %s, %s, %s", t.Name, t.Interrupt,
			tools.NonInterruptible, tools.Cooperative, tools.ThreadInterrupt, tools.ExternallyTerminated)
	}
	return checkSchema(t.Name, t.InputSchema)
}

func checkSchema(name string, schema []byte) error {
	if len(bytes.TrimSpace(schema)) == 0 {
		return fmt.Errorf("tool %s declares no input schema; declare at least {\"type\":\"object\"}", name)
	}
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return fmt.Errorf("tool %s declares an input schema that is not JSON: %v", name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("tool %s declares an input schema that is not a JSON object: %s", name, clip(schema, 60))
	}
	return nil
}

// NormalizeAll checks a whole Describe answer: each tool, and no name twice.
func NormalizeAll(ts []*pluginpb.ToolInfo) error {
	if len(ts) == 0 {
		return fmt.Errorf("it serves no tools")
	}
	seen := map[string]bool{}
	for _, t := range ts {
		if t == nil {
			return fmt.Errorf("it describes an empty tool")
		}
		if err := Normalize(t); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("it declares the tool %s twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
