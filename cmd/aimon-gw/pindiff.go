package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"aimon.dev/gw/policy"
)

// pinDiff says, for each tool whose definition on its server is not the
// one pinned, what changed, a member at a time, for a reviewer; "" when
// nothing did.
func pinDiff(old, now map[string]pinned) string {
	var b strings.Builder
	for _, server := range slices.Sorted(maps.Keys(now)) {
		o, n := old[server], now[server]
		tools := slices.Sorted(maps.Keys(n))
		for t := range o {
			if _, ok := n[t]; !ok {
				tools = append(tools, t)
			}
		}
		slices.Sort(tools)
		for _, tool := range tools {
			op, pinnedBefore := o[tool]
			np, listed := n[tool]
			name := server + "__" + tool
			switch {
			case pinnedBefore && listed && op.SHA256 == np.SHA256:
				continue
			case !listed:
				fmt.Fprintf(&b, "%s: pinned, but the server no longer lists it.\n", name)
			case !pinnedBefore:
				fmt.Fprintf(&b, "%s: new since the pins were written; it is withheld until it is pinned:\n", name)
				writeChanges(&b, nil, flatten(np.Definition))
			case op.Definition == nil:
				fmt.Fprintf(&b, "%s: changed since it was pinned (%s, now %s); the pins hold only its digest, so here is all of it now (run aimon-gw pin to pin definitions):\n", name, op.SHA256, np.SHA256)
				writeChanges(&b, nil, flatten(np.Definition))
			default:
				fmt.Fprintf(&b, "%s: changed since it was pinned:\n", name)
				writeChanges(&b, flatten(op.Definition), flatten(np.Definition))
			}
		}
	}
	return b.String()
}

// A member is one leaf of a definition: its path and its value as JSON.
type member struct{ path, value string }

// writeChanges writes, in path order, each member that is not the same in
// before and after: "- path: old" and "+ path: new".
func writeChanges(b *strings.Builder, before, after []member) {
	bm, am := map[string]string{}, map[string]string{}
	var order []string
	for _, m := range before {
		bm[m.path] = m.value
		order = append(order, m.path)
	}
	for _, m := range after {
		if _, seen := bm[m.path]; !seen {
			order = append(order, m.path)
		}
		am[m.path] = m.value
	}
	slices.SortFunc(order, func(x, y string) int { return strings.Compare(topKey(x)+x, topKey(y)+y) })
	for _, p := range order {
		ov, inB := bm[p]
		nv, inA := am[p]
		if inB && inA && ov == nv {
			continue
		}
		if inB {
			fmt.Fprintf(b, "  - %s: %s\n", p, ov)
		}
		if inA {
			fmt.Fprintf(b, "  + %s: %s\n", p, nv)
		}
	}
}

// topKey orders members as pins.cue does: by policy.PinMembers of their
// first key.
func topKey(path string) string {
	first, _, _ := strings.Cut(path, ".")
	return fmt.Sprintf("%02d", slices.Index(pinMembers, first)+1)
}

var pinMembers = policy.PinMembers()

// flatten lists a definition's leaves, keys sorted; its name is the
// tool's and is left out. An array of scalars is one leaf.
func flatten(def []byte) []member {
	var v map[string]any
	if json.Unmarshal(def, &v) != nil {
		return nil
	}
	delete(v, "name")
	var out []member
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if len(v) == 0 {
				out = append(out, member{path, "{}"})
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(joinPath(path, k), v[k])
			}
			return
		case []any:
			if slices.ContainsFunc(v, func(e any) bool { _, m := e.(map[string]any); _, a := e.([]any); return m || a }) {
				for i, e := range v {
					walk(fmt.Sprintf("%s[%d]", path, i), e)
				}
				return
			}
		}
		b, _ := json.Marshal(v)
		out = append(out, member{path, string(b)})
	}
	walk("", v)
	return out
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func joinPath(path, key string) string {
	if !identifier.MatchString(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
