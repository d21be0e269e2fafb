package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/gateway"
)

// buildEmbed builds testdata/embed, a program of another module that uses
// aimon-gw's public packages alone, in a copy whose replace names this
// module's root; -mod=mod with this module's go.sum beside its own, so
// that a dependency the module gains needs no edit there.
func buildEmbed(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		data, err := os.ReadFile(filepath.Join("testdata/embed", name))
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "go.mod":
			data = bytes.Replace(data, []byte("=> ../../.."), []byte("=> "+root), 1)
		case "go.sum":
			sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, sum...)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "embed")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/embed outside the module: %v\n%s", err, out)
	}
	return bin
}

// TestR7AProgramOutsideTheModule: a program of another module, importing
// aimon.dev/gw/policy and aimon.dev/gw/gateway only, loads a policy,
// decides each call, and calls it again through gateway.Middleware in
// front of a go-sdk server of its own; every decision is the one aimon-gw
// check gives for the same policy and calls, every refused call reaches
// the client as the decision's sentence without the server's tool, and
// every allowed one reaches the server's tool.
func TestR7AProgramOutsideTheModule(t *testing.T) {
	embed := buildEmbed(t)
	dir := writePolicy(t, r7Policy)
	wd := t.TempDir()
	var calls []string
	for _, c := range r7Calls {
		if !strings.Contains(c, `"surface"`) { // the program decides on the main agent
			calls = append(calls, c)
		}
	}
	want := check(t, dir, wd, "agent", calls)
	cmd := exec.Command(embed, dir, wd)
	cmd.Stdin = strings.NewReader(strings.Join(calls, "\n") + "\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("embed: %v\n%s", err, errOut.String())
	}
	sc := bufio.NewScanner(&out)
	i, refused := 0, 0
	for ; sc.Scan(); i++ {
		var got struct {
			ID          string
			Decision    json.RawMessage
			ServerText  string `json:"server_text"`
			ServerError bool   `json:"server_error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("embed printed %q: %v", sc.Text(), err)
		}
		if i >= len(want) {
			t.Fatalf("embed printed more lines than calls: %s", sc.Text())
		}
		var d gateway.Decision
		if err := json.Unmarshal(got.Decision, &d); err != nil {
			t.Fatal(err)
		}
		if diff := same(d, want[i]); diff != "" {
			t.Errorf("call %s:\n%s", got.ID, strings.Replace(diff, "façade", "embed ", 1))
		}
		name := callOf(t, calls[i]).Name
		switch {
		case d.Allowed && (got.ServerError || got.ServerText != "ran "+name):
			t.Errorf("call %s is allowed, and the server's client got %q (error %v)", got.ID, got.ServerText, got.ServerError)
		case !d.Allowed && (!got.ServerError || got.ServerText != d.Reason):
			t.Errorf("call %s is refused (%s), and the server's client got %q (error %v)", got.ID, d.Reason, got.ServerText, got.ServerError)
		case !d.Allowed:
			refused++
		}
	}
	if i != len(want) || refused < 5 {
		t.Errorf("embed answered %d of %d calls, %d refused", i, len(want), refused)
	}
}
