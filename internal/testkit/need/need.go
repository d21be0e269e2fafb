// Package need is the rule for a test that needs a real part of the
// machine (bwrap, redis-server, chromium, gcc, the pinned npm CLIs): where
// the environment variable CI is set, the part is part of CI and its
// absence fails the test; elsewhere the test is skipped, saying what to
// install.
package need

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Missing ends the test for a part that is not there: a failure under CI,
// a skip elsewhere, with the sentence format makes (what is missing, and
// how to get it).
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
		return
	}
	t.Skip(msg)
}

// Command is the path of the program name on PATH; install says how to
// get it ("apt-get install redis-server").
func Command(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is needed and is not on PATH; %s", name, install)
	}
	return p
}

// File is path made absolute, which must exist: what names it in the
// sentence, and install says how to get it.
func File(t testing.TB, what, path, install string) string {
	t.Helper()
	abs, _ := filepath.Abs(path)
	if _, err := os.Stat(abs); err != nil {
		Missing(t, "%s is needed at %s; %s", what, abs, install)
	}
	return abs
}
