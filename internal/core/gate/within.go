package gate

import "encoding/json"

// Within reports whether an input decoded by another reader (encoding/json,
// in the differential tests) is one that Decode would accept under lim:
// the limits, checked on the decoded value.
func Within(in map[string]any, lim Limits) bool {
	w := fastWalk{lim: lim}
	return w.value(in, 1)
}

type fastWalk struct {
	lim           Limits
	names, values int
}

// value checks v at depth against the limits, counting names and values.
func (w *fastWalk) value(v any, depth int) bool {
	switch x := v.(type) {
	case map[string]any:
		if depth > w.lim.MaxDepth || len(x) > w.lim.MaxKeys {
			return false
		}
		w.names += len(x)
		for k, e := range x {
			if len(k) > w.lim.MaxKeyLen {
				return false
			}
			if w.values++; w.lim.MaxValues > 0 && w.values > w.lim.MaxValues || !w.value(e, depth+1) {
				return false
			}
		}
	case []any:
		if depth > w.lim.MaxDepth || len(x) > w.lim.MaxItems {
			return false
		}
		for _, e := range x {
			if w.values++; w.lim.MaxValues > 0 && w.values > w.lim.MaxValues || !w.value(e, depth+1) {
				return false
			}
		}
	case string:
		return len(x) <= w.lim.MaxString
	case json.Number:
		n, ok := parseNumber(string(x))
		return ok && !n.tooLarge()
	}
	return true
}
