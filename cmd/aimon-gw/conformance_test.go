package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestR2MCPConformance plays the MCP conformance cases of
// testdata/conformance, kept as the go-sdk keeps its own
// (mcp/testdata/conformance/server/*.txtar): each archive is a policy
// (files under policy/; a cue.mod is written when it has none), the flags
// of aimon-gw mcp (-- args --, one a line), the client's frames (-- client
// --, one frame a line, sent as written, so that a frame may be malformed;
// a line that begins with # is a note, and "# in flight" says that the
// next frame is a call still running when the frames after it are sent)
// and the frames the server must answer (-- server --, JSON values in
// order). It starts aimon-gw mcp over stdio and compares every frame the
// server writes, ids, results and errors, with the expected ones; what
// varies between builds and runs (serverInfo.version, the temporary
// directory) is normalised. go test -run TestR2MCPConformance -update
// rewrites the server sections from what the server answers (rule R2).
//
// After each client frame the runner sends a ping of its own and reads
// until that ping's answer, so that a notification (no answer) or a
// malformed frame (one error) is placed without a timer. The server
// answers tools/call concurrently, so the runner also reads until a
// tools/call's own answer (unless it is in flight), and the frames are put
// in the order of the client frame they answer: a frame with an id by the
// latest client frame with that id sent before it came, one with id null
// by the frame it came after.
func TestR2MCPConformance(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no conformance cases in testdata/conformance: %v", err)
	}
	bin := gatewayBinary(t)
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runConformance(t, bin, path)
		})
	}
}

// syncID is the id of the runner's own pings; no case uses it.
const syncID = "conformance-sync"

func runConformance(t *testing.T, bin, path string) {
	arch, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	policy := filepath.Join(work, "policy")
	var args, client []string
	var inFlight map[int]bool
	var want []byte
	files := map[string]string{}
	for _, f := range arch.Files {
		switch {
		case f.Name == "args":
			args = nonEmptyLines(f.Data)
		case f.Name == "client":
			client, inFlight = clientFrames(f.Data)
		case f.Name == "server":
			want = f.Data
		case strings.HasPrefix(f.Name, "policy/"):
			files[strings.TrimPrefix(f.Name, "policy/")] = string(f.Data)
		default:
			t.Fatalf("%s: unknown section %q; the sections are args, client, server and policy/...", path, f.Name)
		}
	}
	if len(client) == 0 {
		t.Fatalf("%s: no client frames", path)
	}
	policydir.WriteIn(t, policy, files)

	cmd := exec.Command(bin, append([]string{"mcp", "--log-level", "error", "--cache", "off", "--policy", policy, "--workdir", work}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(work, ".state"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	frames := make(chan []byte)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			frames <- bytes.Clone(sc.Bytes())
		}
	}()
	// next bounds the wait for a frame, so that a server that stops
	// answering fails the case rather than hangs the run.
	next := func() ([]byte, bool) {
		select {
		case f, ok := <-frames:
			return f, ok
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: the server wrote nothing for two minutes; stderr: %s", path, stderr.Bytes())
			return nil, false
		}
	}

	var got []answer
	// place files a server frame read while client frame w was the last sent.
	place := func(f []byte, w int) {
		of := w
		var m struct{ ID json.RawMessage }
		if json.Unmarshal(f, &m) == nil && len(m.ID) > 0 && string(m.ID) != "null" {
			for k := w; k >= 0; k-- {
				if bytes.Equal(frameID(client[k]), m.ID) {
					of = k
					break
				}
			}
		}
		got = append(got, answer{f, of})
	}
	for i, frame := range client {
		fmt.Fprintln(in, frame)
		sync := fmt.Sprintf(`{"jsonrpc":"2.0","id":"%s-%d","method":"ping"}`, syncID, i)
		fmt.Fprintln(in, sync)
		from := len(got)
		for synced := false; !synced || (!inFlight[i] && isCall(frame) && !answered(got[from:], i)); {
			f, ok := next()
			if !ok {
				t.Fatalf("%s: the session ended after client frame %d (%.80s); stderr: %s", path, i+1, frame, stderr.Bytes())
			}
			if bytes.Contains(f, []byte(`"`+syncID+`-`)) {
				synced = true
				continue
			}
			place(f, i)
		}
	}
	in.Close()
	for {
		f, ok := next()
		if !ok {
			break
		}
		place(f, len(client)-1)
	}
	cmd.Wait()
	sort.SliceStable(got, func(i, j int) bool { return got[i].of < got[j].of })

	var norm []string
	for _, a := range got {
		norm = append(norm, normaliseFrame(t, a.frame, work))
	}
	if *update {
		var buf strings.Builder
		for _, f := range norm {
			buf.WriteString(f + "\n")
		}
		replaced := false
		for i := range arch.Files {
			if arch.Files[i].Name == "server" {
				arch.Files[i].Data, replaced = []byte(buf.String()), true
			}
		}
		if !replaced {
			arch.Files = append(arch.Files, txtar.File{Name: "server", Data: []byte(buf.String())})
		}
		if err := os.WriteFile(path, txtar.Format(arch), 0o666); err != nil {
			t.Fatal(err)
		}
		return
	}
	expected := serverFrames(t, path, want)
	for i := 0; i < max(len(norm), len(expected)); i++ {
		switch {
		case i >= len(norm):
			t.Errorf("%s: server frame %d is missing; want\n%s", path, i+1, expected[i])
		case i >= len(expected):
			t.Errorf("%s: extra server frame %d:\n%s", path, i+1, norm[i])
		case norm[i] != expected[i]:
			t.Errorf("%s: server frame %d:\n%s\nwant\n%s", path, i+1, norm[i], expected[i])
		}
	}
}

// serverFrames are the frames of a case's server section, each indented.
func serverFrames(t *testing.T, path string, want []byte) []string {
	t.Helper()
	var expected []string
	dec := json.NewDecoder(bytes.NewReader(want))
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			return expected
		} else if err != nil {
			t.Fatalf("%s: the server section is not a sequence of JSON values: %v", path, err)
		}
		b, _ := json.MarshalIndent(v, "", "\t")
		expected = append(expected, string(b))
	}
}

// normaliseFrame indents a server frame and replaces what varies between
// builds and runs: the gateway's version and the case's directory.
func normaliseFrame(t *testing.T, frame []byte, work string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(frame, &v); err != nil {
		t.Fatalf("the server wrote a frame that is not JSON: %q", frame)
	}
	if m, ok := v.(map[string]any); ok {
		if r, ok := m["result"].(map[string]any); ok {
			if info, ok := r["serverInfo"].(map[string]any); ok && info["version"] != nil {
				info["version"] = "(version)"
			}
		}
	}
	b, _ := json.MarshalIndent(v, "", "\t")
	s := strings.ReplaceAll(string(b), work, "$WORK")
	// Re-indent after the replacement, so that the expected and the
	// produced frames are compared in one form.
	var w any
	json.Unmarshal([]byte(s), &w)
	b, _ = json.MarshalIndent(w, "", "\t")
	return string(b)
}

// answer is a server frame and the client frame it answers.
type answer struct {
	frame []byte
	of    int
}

// answered says whether one of the frames answers client frame i.
func answered(frames []answer, i int) bool {
	for _, a := range frames {
		if a.of == i {
			return true
		}
	}
	return false
}

// isCall says whether a client frame is a tools/call with an id the server
// answers under (a string or an integer), which the server may answer
// after the frames sent behind it.
func isCall(frame string) bool {
	var m struct{ Method string }
	if json.Unmarshal([]byte(frame), &m) != nil || m.Method != "tools/call" {
		return false
	}
	id := frameID(frame)
	var n int64
	var str string
	return json.Unmarshal(id, &n) == nil || json.Unmarshal(id, &str) == nil
}

// clientFrames are the frames of a client section, and which of them are
// in flight.
func clientFrames(data []byte) ([]string, map[int]bool) {
	var frames []string
	inFlight := map[int]bool{}
	next := false
	for _, l := range nonEmptyLines(data) {
		if strings.HasPrefix(l, "#") {
			next = next || strings.TrimSpace(strings.TrimPrefix(l, "#")) == "in flight"
			continue
		}
		if next {
			inFlight[len(frames)] = true
			next = false
		}
		frames = append(frames, l)
	}
	return frames, inFlight
}

// frameID is a client frame's id as written, nil when the frame has none
// or is not a JSON object.
func frameID(frame string) json.RawMessage {
	var m struct{ ID json.RawMessage }
	if json.Unmarshal([]byte(frame), &m) != nil {
		return nil
	}
	return m.ID
}

func nonEmptyLines(data []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
