package need

import (
	"fmt"
	"testing"
)

// ending records how Missing ended a test, instead of ending it.
type ending struct {
	testing.TB
	fatal, skip string
}

func (e *ending) Helper()           {}
func (e *ending) Fatal(args ...any) { e.fatal = fmt.Sprint(args...) }
func (e *ending) Skip(args ...any)  { e.skip = fmt.Sprint(args...) }

// TestMissingFailsUnderCIAndSkipsElsewhere: a part a test needs that is
// not there fails the test where CI is set, and skips it elsewhere, with
// the same sentence; a program that is on PATH is found.
func TestMissingFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	const want = "no-such-program-aimon is needed and is not on PATH; apt-get install it"
	for _, ci := range []string{"1", ""} {
		t.Setenv("CI", ci)
		e := &ending{TB: t}
		Command(e, "no-such-program-aimon", "apt-get install it")
		if ci != "" && (e.fatal != want || e.skip != "") || ci == "" && (e.skip != want || e.fatal != "") {
			t.Errorf("CI=%q: failed with %q, skipped with %q; want %q the one way", ci, e.fatal, e.skip, want)
		}
	}
	if p := Command(t, "sh", "it is POSIX"); p == "" {
		t.Error("sh is not found")
	}
}
