package launch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestR8ProxyEnv: the command sees every proxy variable naming the
// sandbox's port, whatever the gateway's environment said, and no
// NO_PROXY that would send a host around the proxy.
func TestR8ProxyEnv(t *testing.T) {
	tests := []struct {
		note string
		env  []string
		gone string
	}{
		{note: "an empty environment", env: nil},
		{note: "a proxy of the gateway's", env: []string{"HTTPS_PROXY=http://corp:3128", "PATH=/bin"}, gone: "http://corp:3128"},
		{note: "NO_PROXY in either case", env: []string{"NO_PROXY=*", "no_proxy=*"}, gone: "NO_PROXY"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			got := ProxyEnv(tc.env, "http://127.0.0.1:9")
			for _, v := range proxyVars {
				if !slices.Contains(got, v+"=http://127.0.0.1:9") {
					t.Errorf("%s is not the sandbox's proxy: %q", v, got)
				}
			}
			for _, kv := range got {
				if tc.gone != "" && strings.Contains(strings.ToUpper(kv), strings.ToUpper(tc.gone)) {
					t.Errorf("%q stayed: %q", tc.gone, got)
				}
			}
			if len(got) != len(proxyVars)+len(slices.DeleteFunc(slices.Clone(tc.env), func(kv string) bool { return !strings.HasPrefix(kv, "PATH=") })) {
				t.Errorf("other variables were lost or added: %q", got)
			}
		})
	}
}

// TestP16LauncherRunsNothingUntraced: a launcher told that the sandbox's
// programs are judged (Spec.Traced) runs nothing where no tracer follows
// it (bwrap woken with the gateway gone), saying so, exit 126; and one
// whose pids group cannot be joined (a descriptor that is no tasks file)
// (a descriptor open for reading only) runs nothing either, saying so.
func TestP16LauncherRunsNothingUntraced(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	for _, c := range []struct {
		note, says string
		env        []string
	}{
		{"untraced", "not followed by the gateway's tracer", []string{SpecEnv + `={"noexec":[],"mounts":[],"traced":true}`}},
		{"no group", "pids cgroup could not be joined", []string{SpecEnv + `={"noexec":[],"mounts":[]}`, JoinEnv + "=3"}},
	} {
		cmd := exec.Command(self, Arg, "--", "/usr/bin/touch", ran)
		cmd.Env = c.env
		null, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		cmd.ExtraFiles = []*os.File{null}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 126 || !strings.Contains(string(out), c.says) {
			t.Errorf("%s: %v, %s; want exit 126 saying %q", c.note, err, out, c.says)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%s: the command ran", c.note)
		}
	}
}
