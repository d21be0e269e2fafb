package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// probeRan tells whether a probe of an import test ran, from the disk
// under root or from what the CLI sent back (said): marker "!rel" is a
// file that stays unless it ran, "rel=text" a file that holds text once
// it ran, a marker with a slash or a dot a path it makes, any other a
// text in said.
func probeRan(root, marker, said string) bool {
	if file, text, ok := strings.Cut(marker, "="); ok {
		b, _ := os.ReadFile(filepath.Join(root, file))
		return strings.Contains(string(b), text)
	}
	if rel, ok := strings.CutPrefix(marker, "!"); ok {
		_, err := os.Stat(filepath.Join(root, rel))
		return err != nil
	}
	if strings.ContainsAny(marker, "/.") {
		_, err := os.Stat(filepath.Join(root, marker))
		return err == nil
	}
	return strings.Contains(said, marker)
}

// wantSameRuns checks that what ran under an imported policy (got) ran
// under the runtime's own rules (want), and the other way round but for
// the probes in stricter, which the import refuses by design.
func wantSameRuns(t *testing.T, runtime string, want, got []string, stricter ...string) {
	t.Helper()
	for _, p := range got {
		if !slices.Contains(want, p) {
			t.Errorf("%s: ran under the imported policy, not under %s's own rules", p, runtime)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) && !slices.Contains(stricter, p) {
			t.Errorf("%s: ran under %s's own rules, not under the imported policy", p, runtime)
		}
	}
}

// importedPolicy runs aimon-gw import with args and returns a policy
// directory holding what it printed.
func importedPolicy(t *testing.T, args ...string) (dir, src string) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), append([]string{"import"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("import %v: %v\n%s", args, err, stderr.String())
	}
	return moduleDir(t, string(out)), string(out)
}

// wantNotRun checks that the probes the test means the runtime's own
// rules to refuse did not run under them, and, on failure, logs both runs.
func wantNotRun(t *testing.T, runtime string, want, got []string, src string, ownSaid, hookSaid []string, refused ...string) {
	t.Helper()
	for _, p := range refused {
		if slices.Contains(want, p) {
			t.Errorf("%s: ran under %s's own rules, which the test means to refuse it", p, runtime)
		}
	}
	if t.Failed() {
		t.Logf("own rules ran %q\nthe imported policy ran %q\n%s\nown:\n%s\nhook:\n%s", want, got, src, strings.Join(ownSaid, "\n"), strings.Join(hookSaid, "\n"))
	}
}
