package allow

import "strings"

// CommandPatternsMeet reports whether some command matches both command
// patterns (rule P3): whether a child surface's pattern leaves anything of
// its caller's. vet uses it to tell a child list that refuses every call of
// a tool its caller allows.
func CommandPatternsMeet(a, b string) bool {
	pa, wa := strings.CutSuffix(a, ":*")
	pb, wb := strings.CutSuffix(b, ":*")
	covers := func(prefix, cmd string) bool { return cmd == prefix || strings.HasPrefix(cmd, prefix+" ") }
	switch {
	case !wa && !wb:
		return a == b
	case wa && wb:
		return covers(pa, pb) || covers(pb, pa)
	case wa:
		return covers(pa, b)
	default:
		return covers(pb, a)
	}
}
