package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionNamesModuleAndRevision: the build's VCS stamp, else the
// values set with -ldflags -X, else a sentence that says how to get one
// (issue 33).
func TestVersionNamesModuleAndRevision(t *testing.T) {
	t.Parallel()
	stamp := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	for _, tc := range []struct {
		note          string
		info          *debug.BuildInfo
		modVer, rev   string
		want, wantSub string
	}{
		{"a VCS stamp", stamp("(devel)", "vcs.revision", "abc123", "vcs.modified", "false"), "", "", "(devel) abc123", ""},
		{"uncommitted changes", stamp("(devel)", "vcs.revision", "abc123", "vcs.modified", "true"), "", "", "(devel) abc123+dirty", ""},
		{"the stamp wins over -X", stamp("(devel)", "vcs.revision", "abc123"), "", "def456", "(devel) abc123", ""},
		{"go install of a tagged module", stamp("v0.4.0"), "", "", "", "v0.4.0 (no VCS revision recorded"},
		{"no stamp: -X", stamp("(devel)"), "v0.4.0", "def456", "v0.4.0 def456", ""},
		{"-X does not replace a real module version", stamp("v0.3.0"), "v0.4.0", "def456", "v0.3.0 def456", ""},
		{"no build info at all", nil, "", "", "", "(devel) (no VCS revision recorded: build in a git checkout"},
	} {
		got := versionOf(tc.info, tc.modVer, tc.rev)
		if tc.want != "" && got != tc.want || tc.wantSub != "" && !strings.HasPrefix(got, tc.wantSub) {
			t.Errorf("%s: %q, want %q%q", tc.note, got, tc.want, tc.wantSub)
		}
	}
}

// TestVersionFromLdflags: a binary built without a VCS stamp reports the
// revision given with -ldflags -X, as the README's install line does.
func TestVersionFromLdflags(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "aimon-gw")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.revision=0123abcd -X main.moduleVersion=v9.9.9", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || string(out) != "aimon-gw v9.9.9 0123abcd\n" {
		t.Errorf("version: %v %q", err, out)
	}
}
