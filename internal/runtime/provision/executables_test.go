package provision

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/policy"
)

// TestR8ScriptsAreCheckedAsProgramsAre: an argument that names a file (a
// script) lying where a surface may write is refused unless pinned under
// servers.NAME.scripts by the argument as written; a pin must match, name
// a file, and name an argument; a plugin's script cannot be pinned.
func TestR8ScriptsAreCheckedAsProgramsAre(t *testing.T) {
	root := t.TempDir()
	proj, trusted := filepath.Join(root, "proj"), filepath.Join(root, "trusted")
	os.MkdirAll(filepath.Join(proj, "lib"), 0o755)
	os.MkdirAll(trusted, 0o755)
	os.WriteFile(filepath.Join(proj, "srv.py"), []byte("print('served')\n"), 0o644)
	os.WriteFile(filepath.Join(trusted, "srv.py"), []byte("print('trusted')\n"), 0o644)
	os.Symlink(filepath.Join(proj, "srv.py"), filepath.Join(trusted, "link.py"))
	sum, _ := fileSum(filepath.Join(proj, "srv.py"))
	zero := strings.Repeat("0", 64)
	writable := []string{proj}
	tests := []struct {
		note, dir, field string
		args             []string
		pins             map[string]string
		want             []string // what the errors say
	}{
		{note: "a script where a surface writes", dir: proj, args: []string{"srv.py"},
			want: []string{`its script ` + proj + `/srv.py (the argument "srv.py") lies under ` + proj + `, which a surface`, `servers.fs.scripts: {"srv.py": "` + sum + `"}`}},
		{note: "the same by an absolute path, from elsewhere", dir: trusted, args: []string{"-u", proj + "/srv.py"},
			want: []string{"lies under " + proj}},
		{note: "the same, pinned", dir: proj, args: []string{"srv.py"}, pins: map[string]string{"srv.py": sum}},
		{note: "pinned to another file", dir: proj, args: []string{"srv.py"}, pins: map[string]string{"srv.py": zero},
			want: []string{"the script " + proj + "/srv.py has sha256 " + sum + `, but servers.fs.scripts["srv.py"] is ` + zero}},
		{note: "a script nowhere writable", dir: trusted, args: []string{"srv.py"}},
		{note: "a link nowhere writable to a script where a surface writes", dir: trusted, args: []string{"link.py"},
			want: []string{"lies under " + proj}},
		{note: "flags, a directory and a name that is no file", dir: proj, args: []string{"-m", "lib", "srv", "--port=8080"}},
		{note: "a pin for an argument that names no file", dir: proj, args: []string{"gone.py"}, pins: map[string]string{"gone.py": sum},
			want: []string{`pins the argument "gone.py", which names no file from ` + proj}},
		{note: "a pin for no argument", dir: trusted, args: []string{"srv.py"}, pins: map[string]string{"other.py": sum},
			want: []string{`pins "other.py", which is not an argument of the command`}},
		{note: "a plugin's script", field: "-", dir: proj, args: []string{"srv.py"},
			want: []string{"a plugin's scripts cannot be pinned"}},
	}
	for _, tt := range tests {
		field := "servers.fs.scripts"
		if tt.field == "-" {
			field = ""
		}
		errs := checkScripts(tt.args, tt.dir, tt.pins, field, writable)
		if (len(errs) == 0) != (len(tt.want) == 0) {
			t.Errorf("%s: errors %v, want %q", tt.note, errs, tt.want)
			continue
		}
		all := ""
		for _, err := range errs {
			all += err.Error() + "\n"
		}
		for _, w := range tt.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: the errors lack %q:\n%s", tt.note, w, all)
			}
		}
	}
}

// TestR8ServerScriptsAreCheckedBeforeEveryStart: a pinned script changed
// after the load, or gone, stops the next start with a sentence.
func TestR8ServerScriptsAreCheckedBeforeEveryStart(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "srv.sh")
	os.WriteFile(script, []byte("exec true\n"), 0o644)
	sum, _ := fileSum(script)
	u := &policy.Upstream{Server: "fs", Command: []string{"/bin/sh", "srv.sh"}, Cwd: dir, Scripts: map[string]string{"srv.sh": sum}}
	tests := []struct{ note, content, want string }{
		{note: "as pinned", content: "exec true\n"},
		{note: "changed", content: "exec false\n", want: `but servers.fs.scripts["srv.sh"] is ` + sum},
		{note: "gone", want: `names no file from ` + dir + ` now`},
	}
	for _, tt := range tests {
		os.Remove(script)
		if tt.content != "" {
			os.WriteFile(script, []byte(tt.content), 0o644)
		}
		err := CheckServer(u)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.note, err, tt.want)
		}
	}
}
