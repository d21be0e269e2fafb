package allow

import "slices"

// Entries returns the entries along the chain that bear on tool, the
// caller's first, as written: the allow entries, then the deny and the ask
// entries; nil when no list limits the chain. It is what `aimon-gw check`
// shows as the tool's effective entries. They are gathered once per chain
// and tool, not per call (issue 32: a call under 1,000 entries copied them
// all); the slice is shared, and must not be written.
func (e *Effective) Entries(tool string) []string {
	if e.Unlimited() {
		return nil
	}
	e.gathered.Do(func() {
		e.entries = map[string][]string{}
		for _, tools := range []map[string][]*toolEntries{e.deny, e.ask} {
			for t := range tools {
				e.entries[t] = nil
			}
		}
		for t := range e.rules {
			e.entries[t] = nil
		}
		for t := range e.entries {
			e.entries[t] = slices.Clip(e.entriesOf(t))
		}
	})
	if out, ok := e.entries[tool]; ok {
		return out
	}
	return []string{}
}

// entriesOf is Entries of tool gathered from the lists.
func (e *Effective) entriesOf(tool string) []string {
	out := []string{}
	if r, ok := e.rules[tool]; ok {
		out = r.raws(nil)
	}
	for _, lvs := range [][]*toolEntries{e.deny[tool], e.ask[tool]} {
		for _, lv := range lvs {
			for _, in := range lv.infos {
				out = append(out, in.Raw)
			}
		}
	}
	return out
}
