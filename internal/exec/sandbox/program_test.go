package sandbox

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/tools"
)

func TestMain(m *testing.M) { gobuild.Main(m) }

// smallProgram is the sandbox program built as this test binary is, with
// no revision stamped (go test stamps none): the same build to compare.
func smallProgram(t testing.TB) string {
	return gobuild.Binary(t, gobuild.SandboxProgram, "-buildvcs=false")
}

// besideSmall makes Launcher a link of this test binary in a directory of
// its own, with beside it what put makes there (nothing when nil), until
// the test ends; it returns the link.
func besideSmall(t testing.TB, put func(dir string)) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "gateway")
	if err := os.Link(self, exe); err != nil {
		t.Fatal(err)
	}
	if put != nil {
		put(dir)
	}
	saved := Launcher
	Launcher = func() (string, error) { return exe, nil }
	t.Cleanup(func() { Launcher = saved })
	return exe
}

// linkSmall puts the sandbox program in dir with mode.
func linkSmall(t testing.TB, dir string, mode os.FileMode) string {
	t.Helper()
	return putProgram(t, dir, smallProgram(t), mode)
}

// putProgram puts a copy of the program src in dir as the sandbox
// program, with mode.
func putProgram(t testing.TB, dir, src string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, ProgramName)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestP16SmallLauncherTrust: the sandbox program beside the gateway is
// opened only when nobody but root and the gateway's user could have put
// it there or changed it, and it is the sandbox program of this build;
// each other case says why, and a FIFO put there is not waited on.
func TestP16SmallLauncherTrust(t *testing.T) {
	asRoot := os.Geteuid() == 0
	tests := []struct {
		note, why string // why "" is trusted
		make      func(t *testing.T, dir string) string
	}{
		{"the sandbox program, 0755", "", func(t *testing.T, dir string) string { return linkSmall(t, dir, 0o755) }},
		{"owner-only, 0700", "", func(t *testing.T, dir string) string { return linkSmall(t, dir, 0o700) }},
		{"writable by its group", "writable by its group or by others (mode 0775)", func(t *testing.T, dir string) string { return linkSmall(t, dir, 0o775) }},
		{"writable by others", "writable by its group or by others (mode 0757)", func(t *testing.T, dir string) string { return linkSmall(t, dir, 0o757) }},
		{"not executable", "the gateway may not execute it", func(t *testing.T, dir string) string { return linkSmall(t, dir, 0o644) }},
		{"in a directory others may write", "is writable by its group or by others (mode 0777)", func(t *testing.T, dir string) string {
			os.Chmod(dir, 0o777)
			return linkSmall(t, dir, 0o755)
		}},
		{"in a sticky directory others may write", "is writable by its group or by others (mode 1777)", func(t *testing.T, dir string) string {
			os.Chmod(dir, os.ModeSticky|0o777)
			return linkSmall(t, dir, 0o755)
		}},
		{"below a sticky directory, as /tmp", "", func(t *testing.T, dir string) string {
			os.Chmod(dir, os.ModeSticky|0o777)
			os.Mkdir(dir+"/bin", 0o755)
			return linkSmall(t, dir+"/bin", 0o755)
		}},
		{"below a directory others may write", "is writable by its group or by others (mode 0777)", func(t *testing.T, dir string) string {
			os.Chmod(dir, 0o777)
			os.Mkdir(dir+"/bin", 0o755)
			return linkSmall(t, dir+"/bin", 0o755)
		}},
		{"a symbolic link", "it is a symbolic link", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, ProgramName)
			os.Symlink(smallProgram(t), p)
			return p
		}},
		{"a FIFO", "it is not a regular file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, ProgramName)
			if err := syscall.Mkfifo(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"a directory", "it is not a regular file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, ProgramName)
			os.Mkdir(p, 0o755)
			return p
		}},
		{"a script", "it is not a Go program of the gateway's", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, ProgramName)
			os.WriteFile(p, []byte("#!/bin/sh\ntouch ran\n"), 0o755)
			return p
		}},
		{"another program of the gateway's module", `it is not the gateway's sandbox program (its package is "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave"`, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, ProgramName)
			data, _ := os.ReadFile(gobuild.Binary(t, "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave", "-buildvcs=false"))
			os.WriteFile(p, data, 0o755)
			return p
		}},
	}
	if asRoot {
		tests = append(tests, struct {
			note, why string
			make      func(t *testing.T, dir string) string
		}{"owned by another uid", "it is owned by uid 12345, neither root nor the gateway's user", func(t *testing.T, dir string) string {
			p := linkSmall(t, dir, 0o755)
			os.Lchown(p, 12345, 12345)
			return p
		}}, struct {
			note, why string
			make      func(t *testing.T, dir string) string
		}{"in a directory of another uid", "is owned by uid 12345, neither root nor the gateway's user", func(t *testing.T, dir string) string {
			os.Lchown(dir, 12345, 12345)
			return linkSmall(t, dir, 0o755)
		}})
	}
	for _, tt := range tests {
		t.Run(tt.note, func(t *testing.T) {
			base := t.TempDir()
			os.Chmod(base, 0o755)
			dir := base + "/d"
			os.Mkdir(dir, 0o755)
			p := tt.make(t, dir)
			f, why := openTrusted(p)
			if f != nil {
				f.Close()
			}
			if tt.why == "" && (f == nil || why != "") || tt.why != "" && (f != nil || !strings.Contains(why, tt.why)) {
				t.Errorf("%s: opened %v, why %q; want %q", p, f != nil, why, tt.why)
			}
		})
	}
	if f, why := openTrusted(filepath.Join(t.TempDir(), ProgramName)); f != nil || why != "" {
		t.Errorf("an absent program: %v, %q; want nothing to say", f, why)
	}
}

// TestP16SmallLauncherOtherBuild: a sandbox program of another build
// than the gateway's (Go, the module's version or sum, the revision,
// whether it was modified, a module both hold) is not the gateway's; the
// same build is, where one records what the other does not.
func TestP16SmallLauncherOtherBuild(t *testing.T) {
	base := func() *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Path: "aimon.dev/gw/cmd/aimon-gw", Main: debug.Module{Path: "aimon.dev/gw", Version: "v1.2.3"},
			Deps:     []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.40.0", Sum: "h1:a"}, {Path: "cuelang.org/go", Version: "v0.12.0"}},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}, {Key: "GOOS", Value: "linux"}}}
	}
	small := func(change func(*debug.BuildInfo)) *debug.BuildInfo {
		b := base()
		b.Path = "aimon.dev/gw/cmd/aimon-gw-sandbox"
		b.Deps = b.Deps[:1]
		if change != nil {
			change(b)
		}
		return b
	}
	if why := otherBuild(base(), small(nil)); why != "" {
		t.Errorf("the same build: %s", why)
	}
	if why := otherBuild(base(), small(func(b *debug.BuildInfo) { b.Settings = nil })); why != "" {
		t.Errorf("a build that records no revision (-buildvcs=false): %s", why)
	}
	if why := otherBuild(base(), small(func(b *debug.BuildInfo) { b.Deps = append(b.Deps, &debug.Module{Path: "example.com/m"}) })); why != "" {
		t.Errorf("a module the gateway's build does not list (a test binary's lists fewer): %s", why)
	}
	for _, c := range []struct {
		note, want string
		change     func(*debug.BuildInfo)
	}{
		{"another program", "not the gateway's sandbox program", func(b *debug.BuildInfo) { b.Path = "aimon.dev/gw/cmd/other" }},
		{"another Go", `Go "go1.25.0"`, func(b *debug.BuildInfo) { b.GoVersion = "go1.25.0" }},
		{"another version", `version "v1.2.2"`, func(b *debug.BuildInfo) { b.Main.Version = "v1.2.2" }},
		{"another revision", `vcs.revision "def"`, func(b *debug.BuildInfo) { b.Settings[0].Value = "def" }},
		{"modified", `vcs.modified "true"`, func(b *debug.BuildInfo) { b.Settings[1].Value = "true" }},
		{"another module version", `golang.org/x/sys "v0.39.0"`, func(b *debug.BuildInfo) { b.Deps[0].Version = "v0.39.0" }},
		{"another module sum", "golang.org/x/sys", func(b *debug.BuildInfo) { b.Deps[0].Sum = "h1:b" }},
		{"a replaced module", "golang.org/x/sys", func(b *debug.BuildInfo) { b.Deps[0].Replace = &debug.Module{Path: "../sys"} }},
	} {
		if why := otherBuild(base(), small(c.change)); !strings.Contains(why, c.want) {
			t.Errorf("%s: %q; want %q", c.note, why, c.want)
		}
	}
}

// TestP16SmallLauncherOfAnotherBuild: a sandbox program built from other
// sources than the gateway's, with no revision recorded by either (as the
// image builds them) and the same modules, is not the gateway's: it is
// not used, the gateway's own binary starts each sandbox instead, and the
// warning says why and what to do; the sandbox program of the gateway's
// own build, built apart from it as go install does, is used.
func TestP16SmallLauncherOfAnotherBuild(t *testing.T) {
	for _, c := range []struct {
		note, why string
		program   func(t testing.TB) string
	}{
		{"another build", "it was built from other sources than this gateway (the digest of its packages trace and launch is ", gobuild.OtherSandboxProgram},
		{"the same build", "", smallProgram},
	} {
		t.Run(c.note, func(t *testing.T) {
			exe := besideSmall(t, func(dir string) { putProgram(t, dir, c.program(t), 0o755) })
			var logged bytes.Buffer
			old := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
			defer slog.SetDefault(old)
			l, err := chooseLauncher(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer l.f.Close()
			if c.why == "" {
				if l.name != ProgramName || logged.Len() > 0 {
					t.Errorf("the sandbox program of the same build is not used (%s): %s", l.name, logged.String())
				}
				return
			}
			if l.name != filepath.Base(exe) || l.f.Name() != exe {
				t.Errorf("the sandbox program of another build is used: %s, %s", l.name, l.f.Name())
			}
			if s := logged.String(); !strings.Contains(s, "is not used, since "+c.why) || !strings.Contains(s, "go install ./cmd/...") {
				t.Errorf("the warning does not say why the program is not used (%q): %s", c.why, s)
			}
		})
	}
}

// TestP16SmallLauncherRunsTheSandbox: with the sandbox program beside the
// gateway, bwrap starts it by its descriptor as the launcher of a judged
// sandbox, the only process started for it but bwrap (the gateway's own
// thread traces it), and a denied program does not run; with one that
// may not be trusted beside it, the gateway's own binary is the launcher,
// as before, and the denied program does not run.
func TestP16SmallLauncherRunsTheSandbox(t *testing.T) {
	need(t)
	deny := denyTouch()
	for _, c := range []struct {
		note string
		put  func(dir string)
		want func(exe string) string
	}{
		{"trusted", func(dir string) { linkSmall(t, dir, 0o755) }, func(exe string) string { return filepath.Join(filepath.Dir(exe), ProgramName) }},
		{"writable by its group", func(dir string) { linkSmall(t, dir, 0o775) }, func(exe string) string { return exe }},
		{"absent", nil, func(exe string) string { return exe }},
	} {
		t.Run(c.note, func(t *testing.T) {
			exe := besideSmall(t, c.put)
			dir := t.TempDir()
			cmd, err := Command(&tools.Sandbox{Writable: []string{dir}, Exec: deny}, dir, []string{"bash", "-c", "echo ran; touch made"}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.CombinedOutput()
			Release(cmd)
			Finish(cmd)
			bw, _ := bwrap()
			launcher := ""
			if i := slices.Index(cmd.Args, "--"); i > 0 && i+1 < len(cmd.Args) {
				if n, err := strconv.Atoi(strings.TrimPrefix(cmd.Args[i+1], "/proc/self/fd/")); err == nil && n >= 3 && n-3 < len(cmd.ExtraFiles) {
					launcher = cmd.ExtraFiles[n-3].Name()
				}
			}
			if cmd.Path != bw || launcher != c.want(exe) {
				t.Errorf("the gateway starts %s %q, its launcher %q; want bwrap itself, its launcher %s by its descriptor", cmd.Path, cmd.Args, launcher, c.want(exe))
			}
			if _, serr := os.Stat(dir + "/made"); err == nil || serr == nil || !strings.Contains(string(out), "ran") || !strings.Contains(string(out), "Bash(touch:*)") {
				t.Errorf("the denied touch ran, or the command did not (%v): %s", err, out)
			}
		})
	}
}
