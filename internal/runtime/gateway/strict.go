package gateway

import (
	"encoding/json"
	"slices"
)

// OpenAI's strict mode accepts a subset of JSON Schema: every object closed
// with additionalProperties false and every property in required, an
// optional property made nullable instead, and only the keywords below.
// A JSON null counts as missing (rule S4), so a strict-mode call that sends
// null for an optional field is the call that leaves it out.

// strictKeywords are the keywords strict mode accepts (OpenAI's structured
// outputs guide, "Supported schemas"); the others are dropped.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "anyOf": true, "items": true, "description": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minItems": true, "maxItems": true,
}

// strictSchema rewrites an input schema for strict mode; ok is false when
// it cannot be (an object open to undeclared names, a value of any type),
// and the tool is then listed with strict false and its schema as is.
func strictSchema(raw json.RawMessage) (json.RawMessage, bool) {
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return raw, false
	}
	if !strictNode(s) {
		return raw, false
	}
	out, err := json.Marshal(s)
	return out, err == nil
}

// strictNode rewrites s in place.
func strictNode(s map[string]any) bool {
	for k := range s {
		if !strictKeywords[k] {
			delete(s, k)
		}
	}
	if _, typed := s["type"]; !typed && s["enum"] == nil && s["const"] == nil && s["anyOf"] == nil {
		return false // any value: strict mode has no form for it
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, a := range alts {
			if m, ok := a.(map[string]any); !ok || !strictNode(m) {
				return false
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok && !strictNode(items) {
		return false
	}
	props, _ := s["properties"].(map[string]any)
	if isType(s, "object") {
		if ap, open := s["additionalProperties"]; open && ap != false {
			return false
		}
		s["additionalProperties"] = false
		required := map[string]bool{}
		if rs, ok := s["required"].([]any); ok {
			for _, r := range rs {
				if n, ok := r.(string); ok {
					required[n] = true
				}
			}
		}
		names := make([]any, 0, len(props))
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, name := range keys {
			p, ok := props[name].(map[string]any)
			if !ok || !strictNode(p) {
				return false
			}
			if !required[name] {
				nullable(p)
			}
			names = append(names, name)
		}
		s["required"] = names
		if len(props) == 0 {
			s["properties"] = map[string]any{}
		}
	}
	return true
}

// isType reports whether s's type is, or includes, t.
func isType(s map[string]any, t string) bool {
	switch v := s["type"].(type) {
	case string:
		return v == t
	case []any:
		return slices.Contains(v, any(t))
	}
	return false
}

// nullable makes s admit null as well: how strict mode says optional.
func nullable(s map[string]any) {
	switch {
	case s["enum"] != nil:
		if e, ok := s["enum"].([]any); ok && !slices.Contains(e, nil) {
			s["enum"] = append(e, nil)
		}
		if _, typed := s["type"]; typed && !isType(s, "null") {
			addNull(s)
		}
	case s["const"] != nil:
		c := s["const"]
		delete(s, "const")
		s["enum"] = []any{c, nil}
	case s["anyOf"] != nil:
		alts := s["anyOf"].([]any)
		s["anyOf"] = append(alts, map[string]any{"type": "null"})
	default:
		addNull(s)
	}
}

func addNull(s map[string]any) {
	switch v := s["type"].(type) {
	case string:
		if v != "null" {
			s["type"] = []any{v, "null"}
		}
	case []any:
		if !slices.Contains(v, any("null")) {
			s["type"] = append(v, "null")
		}
	}
}
