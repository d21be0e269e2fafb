package allow

// Entries returns the entries along the chain that bear on tool, the
// caller's first, as written; nil when no list limits the chain. It is what
// `aimon-gw check` shows as the tool's effective entries.
func (e *Effective) Entries(tool string) []string {
	if e.Unlimited() {
		return nil
	}
	r, ok := e.rules[tool]
	if !ok {
		return []string{}
	}
	return r.raws(nil)
}
