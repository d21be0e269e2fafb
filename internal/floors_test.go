// Package internal_test holds the rule that the folders are floors: every
// import of the module's own packages points down (issue 31).
package internal_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "aimon.dev/gw/"

// floor is the floor a package directory (relative to the module root)
// stands on; -1 for a folder outside the layering (examples, benchmarks).
// The public contract (tools, plugin, schema) is the ground: it imports
// nothing internal, so nothing outside the module needs an internal type.
// The public API (policy, gateway) is a façade over every internal floor,
// above them all and below the command: nothing internal imports it, so
// the internal packages stay free to change under it.
func floor(dir string) int {
	for _, f := range []struct {
		prefix string
		floor  int
	}{
		{"tools", 0}, {"plugin", 0}, {"schema", 0},
		{"internal/core/", 1},
		{"internal/exec/", 2},
		{"internal/runtime/", 3},
		{"internal/front/", 4},
		{"policy", 5}, {"gateway", 5},
		{"cmd/", 6},
	} {
		if dir == f.prefix || strings.HasPrefix(dir, strings.TrimSuffix(f.prefix, "/")+"/") {
			return f.floor
		}
	}
	return -1
}

// public reports whether a package (relative to the module root) is of
// the public API, which nothing internal may import.
func public(pkg string) bool {
	for _, p := range []string{"policy", "gateway"} {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// TestFloorsImportDown parses every Go file's imports: a package imports
// only packages on its own floor or below, and the public packages import
// no internal one; nothing internal, its tests and the test kit included,
// imports the public API. internal/testkit serves tests of any floor, and
// a test may build an example.
func TestFloorsImportDown(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		from := floor(dir)
		if from < 0 && !strings.HasPrefix(dir, "internal/") {
			return nil // the test kit is on no floor, yet internal
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(path, "_test.go")
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			checked++
			target := strings.TrimPrefix(p, module)
			if strings.HasPrefix(dir, "internal/") && public(target) {
				t.Errorf("%s imports %s, a public package: nothing internal imports the public API (policy, gateway), a façade over it", fset.Position(imp.Pos()), target)
				continue
			}
			if from < 0 {
				continue
			}
			if strings.HasPrefix(target, "internal/testkit/") {
				if !test {
					t.Errorf("%s imports %s, a test kit, outside a test", fset.Position(imp.Pos()), target)
				}
				continue
			}
			to := floor(target)
			switch {
			case to < 0 && test && strings.HasPrefix(target, "examples/"):
				// a test may build an example plugin
			case to < 0:
				t.Errorf("%s imports %s, which is on no floor; place it under internal/{core,exec,runtime,front}", fset.Position(imp.Pos()), target)
			case to > from:
				t.Errorf("%s (floor %d) imports %s (floor %d): imports point down; move the shared part to a lower floor", fset.Position(imp.Pos()), from, target, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d imports; the walk no longer finds the packages", checked)
	}
}

// TestFloorsOfTheLayout pins floor itself, so that a prefix typo cannot
// silently lift every package onto no floor.
func TestFloorsOfTheLayout(t *testing.T) {
	for _, tc := range []struct {
		note, dir string
		want      int
	}{
		{"the tool contract", "tools", 0},
		{"the plugin SDK", "plugin/pluginpb", 0},
		{"a core package", "internal/core/policy", 1},
		{"the sandbox", "internal/exec/sandbox/launch", 2},
		{"the gateway", "internal/runtime/gateway", 3},
		{"a front end", "internal/front/mcpfront", 4},
		{"the public policy API", "policy", 5},
		{"the public gateway API", "gateway", 5},
		{"a name that only starts alike", "gatewayx", -1},
		{"the command", "cmd/aimon-gw", 6},
		{"a name that only starts alike", "toolsx", -1},
		{"an example", "examples/plugins/wordcount", -1},
	} {
		if got := floor(tc.dir); got != tc.want {
			t.Errorf("%s: floor(%q) = %d, want %d", tc.note, tc.dir, got, tc.want)
		}
	}
}

// TestFloorsDecisionIsPure: the one decision (internal/core/decide) asks
// the file system only through its FS, and knows no protocol: its files
// import the core, the tool contract and the standard library, never os,
// the network, a runtime, a front end or a protocol's SDK (issue 47).
func TestFloorsDecisionIsPure(t *testing.T) {
	files, err := filepath.Glob("core/decide/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no files of the decision: %v", err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			switch {
			case strings.HasPrefix(p, module+"internal/core/"), p == module+"tools":
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s: the decision imports the core, tools and the standard library only", fset.Position(imp.Pos()), p)
			case p == "os" || strings.HasPrefix(p, "os/") || first == "net" || p == "syscall" || p == "io/ioutil":
				t.Errorf("%s imports %s: the decision asks the file system through its FS, and nothing else of the host", fset.Position(imp.Pos()), p)
			}
		}
	}
}
