package allow

import (
	"strconv"
	"strings"
	"testing"
)

func TestP3CommandWordBoundary(t *testing.T) {
	e := chain(t, []string{"Bash(git:*)", "Bash(npm install)", "Bash(./gradlew:*)", "Bash(go test:*)", "Bash(a:*b)", "Bash(x.y:*)"})
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"git", true},
		{"git log", true},
		{"git log --oneline -5", true},
		{"gitk", false},
		{"git-lfs pull", false},
		{"git\tlog", false},
		{" git log", false},
		{"npm install", true},
		{"npm install left-pad", false},
		{"npm installx", false},
		{"npm", false},
		{"./gradlew build", true},
		{"./gradlewx", false},
		{"go test ./...", true},
		{"go testx", false},
		{"go vet", false},
		{"echo git log", false},
		{"git:*", false},
		// Only a trailing :* is a wildcard, and the prefix is literal.
		{"a:*b", true},
		{"a:xb", false},
		{"a b", false},
		{"x.y z", true},
		{"xzy z", false},
	} {
		d := e.Decide("Bash", map[string]any{"command": c.cmd}, "/w")
		if d.Allowed != c.want || d.Rule != "P3" {
			t.Errorf("Bash %q: %+v, want allowed=%v by P3", c.cmd, d, c.want)
		}
	}
}

// TestP3CommandBypasses: every classic way to run more than the pattern
// names is denied, with a sentence that says why.
func TestP3CommandBypasses(t *testing.T) {
	e := chain(t, []string{"Bash(git:*)", "Bash(ls)"})
	for _, cmd := range []string{
		"git log && rm -rf /",
		"git log; rm -rf /",
		"git log | sh",
		"git log || rm -rf /",
		"git log & rm -rf /",
		"git log $(rm -rf /)",
		"git log `rm -rf /`",
		"git log ${HOME}",
		"git log\nrm -rf /",
		"git log\rrm -rf /",
		"git log\x00rm",
		"git log > /etc/passwd",
		"git log < /etc/shadow",
		"git log >> x",
		"git (log)",
		"ls;",
		"ls\n",
	} {
		d := e.Decide("Bash", map[string]any{"command": cmd}, "/w")
		if d.Allowed {
			t.Errorf("Bash %q allowed: %+v", cmd, d)
			continue
		}
		if d.Rule != "P3" || !strings.Contains(d.Reason, "matches no pattern") || !strings.Contains(d.Reason, "Bash(git:*)") {
			t.Errorf("Bash %q: reason %q (%s) does not explain the metacharacter rule", cmd, d.Reason, d.Rule)
		}
	}
}

func TestP7BadCommandPatterns(t *testing.T) {
	for _, p := range []string{":*", " :*", "git log; rm:*", "a|b", "$(x)", "x\ny"} {
		l, errs := Compile(testCtx, []string{"Bash(" + p + ")", "Bash"}, testSubjects)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), strconv.Quote("Bash("+p+")")) {
			t.Errorf("Bash(%q): errors %v, want one that quotes the entry", p, errs)
		}
		e, err := Chain(l)
		if err != nil {
			t.Fatal(err)
		}
		// The bad pattern denies: the name-only entry beside it is no escape.
		for _, cmd := range []string{"git", "ls", p} {
			if d := e.Decide("Bash", map[string]any{"command": cmd}, ""); d.Allowed || d.Rule != "P7" {
				t.Errorf("Bash(%q) with Bash: %q gives %+v, want a P7 denial", p, cmd, d)
			}
		}
	}
}

// oracleCommand is rule P3 read literally, to check the CUE constraint by.
func oracleCommand(pattern, cmd string) bool {
	if strings.ContainsAny(cmd, ";|&`$><()\n\r\x00") || strings.TrimSpace(cmd) == "" {
		return false
	}
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
	}
	return cmd == pattern
}

func FuzzP3CommandMatcher(f *testing.F) {
	for _, s := range [][2]string{
		{"git:*", "git log"}, {"git:*", "gitk"}, {"git:*", "git log; rm"}, {"npm install", "npm install"},
		{"a.b:*", "axb c"}, {"x:*", "x"}, {"[a]:*", "a b"}, {"git log:*", "git log\x00"}, {"^x:*", "^x y"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, cmd string) {
		entry := "Bash(" + pattern + ")"
		l, errs := Compile(testCtx, []string{entry}, testSubjects)
		e, err := Chain(l)
		if err != nil {
			t.Fatal(err)
		}
		d := e.Decide("Bash", map[string]any{"command": cmd}, "/w")
		if len(errs) > 0 {
			if d.Allowed {
				t.Fatalf("bad pattern %q allowed %q", pattern, cmd)
			}
			return
		}
		if want := oracleCommand(pattern, cmd) && validUTF8(cmd); d.Allowed != want {
			t.Fatalf("Bash(%q) on %q: allowed=%v, rule P3 says %v (%s)", pattern, cmd, d.Allowed, want, d.Reason)
		}
	})
}
