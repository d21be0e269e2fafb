package allow

// Entries returns the entries along the chain that bear on tool, the
// caller's first, as written: the allow entries, then the deny and the ask
// entries; nil when no list limits the chain. It is what `aimon-gw check`
// shows as the tool's effective entries.
func (e *Effective) Entries(tool string) []string {
	if e.Unlimited() {
		return nil
	}
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
