package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestR3TwoFileEditGoesInForceWhole: an edit of two files renamed into
// place 200 ms apart under CPU load, whose half-way state would allow
// Glob, puts no in-between policy in force: serve waits for the tree to
// settle (--settle), and Glob is refused before, during and after the edit.
func TestR3TwoFileEditGoesInForceWhole(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, reloadHeader+`_x: string
_y: string
agent: "allowed-tools": ["Echo", if _x != _y {"Glob"}]
`)
	writeFile(t, filepath.Join(dir, "a.cue"), "package policy\n\n_x: \"1\"\n")
	writeFile(t, filepath.Join(dir, "b.cue"), "package policy\n\n_y: \"1\"\n")
	p := startServeProc(t, "--policy", dir, "--workdir", dir, "--cache", "off") // the default --settle
	stderr := &p.stderr
	stop := make(chan struct{})
	defer close(stop)
	cpuLoad(stop)
	edited := make(chan struct{})
	call := func(i int) map[string]any {
		p.write(fmt.Sprintf(`{"type":"tool_use","id":"g%d","name":"Glob","input":{"pattern":"*.cue"}}`, i))
		r, ok := p.next()
		if !ok {
			t.Fatalf("serve ended: %s", stderr.String())
		}
		return r
	}
calls:
	for i := 0; ; i++ {
		if i == 4 {
			// The renames' own clock, not the calls': 200 ms apart.
			writeFile(t, filepath.Join(dir, "a.cue"), "package policy\n\n_x: \"2\"\n")
			time.AfterFunc(200*time.Millisecond, func() {
				os.WriteFile(filepath.Join(dir, "b.tmp~"), []byte("package policy\n\n_y: \"2\"\n"), 0o644)
				os.Rename(filepath.Join(dir, "b.tmp~"), filepath.Join(dir, "b.cue"))
				close(edited)
			})
		}
		if r := call(i); r["is_error"] != true {
			t.Fatalf("call %d: Glob allowed: an in-between policy was in force: %v\n%s", i, r, stderr.String())
		}
		select {
		case <-edited:
			if strings.Contains(stderr.String(), "generation=2") {
				break calls
			}
		default:
		}
		if i > 1000 {
			t.Fatalf("the edit never went in force:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(stderr.String(), "generation=3") {
		t.Errorf("the edit went in force in more than one step:\n%s", stderr.String())
	}
}

// TestR3BadSettle: a settle interval that is not positive is a usage
// error.
func TestR3BadSettle(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--settle", "0s"}, {"mcp", "--settle", "-1s"}, {"serve", "--settle", "a while"}} {
		out, err := exec.Command(gatewayBinary(t), args...).CombinedOutput()
		if code := exitCode(err); code != exitUsage || !strings.Contains(string(out), "settle") {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
}

// TestR3GitCheckoutOfAHundredFilesGoesInForceWhole: a git checkout that
// changes 100 policy files, whose every half-way state would allow Glob,
// under CPU load, puts only the whole commit in force (the default
// --settle).
func TestR3GitCheckoutOfAHundredFilesGoesInForceWhole(t *testing.T) {
	t.Parallel()
	gitBin := needCommand(t, "git", "the Debian package git")
	dir := moduleDir(t, `package policy

import (
	"list"

	"aimon.dev/gw/schema"
)

tools: {Echo: schema.#Echo, Glob: schema.#Glob}
_f: [string]: string
_vs: [for _, v in _f {v}]
agent: "allowed-tools": ["Echo", if list.Contains(_vs, "1") && list.Contains(_vs, "2") {"Glob"}]
`)
	git := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(gitBin, append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	files := func(v string) {
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.cue", i)), []byte(fmt.Sprintf("package policy\n\n_f: f%03d: %q\n", i, v)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	git("init", "-q", "-b", "main")
	files("1")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	git("checkout", "-q", "-b", "two")
	files("2")
	git("commit", "-q", "-am", "two")
	git("checkout", "-q", "main")
	p := startServeProc(t, "--policy", dir, "--workdir", dir, "--cache", "off")
	stderr := &p.stderr
	stop := make(chan struct{})
	defer close(stop)
	cpuLoad(stop) // beside the checkout
	for i := 0; ; i++ {
		if i == 4 {
			checkout := exec.Command(gitBin, "-C", dir, "checkout", "-q", "two")
			if err := checkout.Start(); err != nil {
				t.Fatal(err)
			}
			defer checkout.Wait()
		}
		p.write(fmt.Sprintf(`{"type":"tool_use","id":"g%d","name":"Glob","input":{"pattern":"*.md"}}`, i))
		r, ok := p.next()
		if !ok {
			t.Fatalf("serve ended: %s", stderr.String())
		}
		if r["is_error"] != true {
			t.Fatalf("call %d: Glob allowed: a half-way checkout was in force: %v\n%s", i, r, stderr.String())
		}
		if strings.Contains(stderr.String(), "generation=2") {
			break
		}
		if i > 2000 {
			t.Fatalf("the checkout never went in force:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(stderr.String(), "generation=3") {
		t.Errorf("the checkout went in force in more than one step:\n%s", stderr.String())
	}
}

// cpuLoad keeps two goroutines busy until stop is closed: the load an
// edit meets beside a build or a test run.
func cpuLoad(stop <-chan struct{}) {
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
}
