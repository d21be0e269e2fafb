package httpfront

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookProjects makes two projects, a and b, each with its notes.txt, and
// a policy whose lists tell them apart: a's files may be read and
// searched, b's only read.
func hookProjects(tb testing.TB) (pol, a, b string) {
	root, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	a, b = filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "notes.txt"), []byte("notes\n"), 0o644)
	}
	pol = fmt.Sprintf("tools: {Read: {builtin: Read}, Glob: {builtin: Glob}}\nagent: {allowed-tools: [\"Read(%[1]s/**)\", \"Glob(%[1]s/**)\", \"Read(%[2]s/**)\"]}\nprincipals: {alice: {subject: alice, surface: [agent]}}\n", a, b)
	return pol, a, b
}

// postHook posts one PreToolUse input to the HTTP hook as alice and
// returns its answer.
func postHook(tb testing.TB, base, input string) hookAnswer {
	req, _ := http.NewRequest(http.MethodPost, base+HookPath, strings.NewReader(input))
	req.Header.Set("Authorization", "Bearer t-alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Error(err)
		return hookAnswer{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var o struct {
		Out hookAnswer `json:"hookSpecificOutput"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &o) != nil {
		tb.Errorf("%s: %d %s", input, resp.StatusCode, body)
	}
	return o.Out
}

type hookAnswer struct {
	Decision string         `json:"permissionDecision"`
	Reason   string         `json:"permissionDecisionReason"`
	Updated  map[string]any `json:"updatedInput"`
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// hookInput is a PreToolUse input of call (its tool_name onwards) in cwd
// ("" for none).
func hookInput(cwd, call string) string {
	if cwd != "" {
		cwd = `"cwd":` + strconvQuote(cwd) + `,`
	}
	return `{"session_id":"s",` + cwd + `"hook_event_name":"PreToolUse","tool_name":` + call + `,"tool_use_id":"t"}`
}

const (
	readNotes = `"Read","tool_input":{"file_path":"notes.txt"}`
	globTexts = `"Glob","tool_input":{"pattern":"*.txt"}`
)

// TestR7HTTPHookDecidesInEachRequestsCwd: one gateway of the generation
// answers the HTTP hook's requests of two projects at once, each in its
// own cwd: a relative path is the request's project's, a search runs in
// it, and what a's lists allow b's refuse, with requests of both in
// flight together (run under -race: nothing of one request is another's).
// A cwd that cannot be used (relative, missing, not there, a file) is
// refused by R7's sentences; a cwd that is a link is decided where it is.
func TestR7HTTPHookDecidesInEachRequestsCwd(t *testing.T) {
	pol, a, b := hookProjects(t)
	base, _, _ := serveFront(t, pol)
	check := func(cwd string) {
		r := postHook(t, base, hookInput(cwd, readNotes))
		if want := filepath.Join(cwd, "notes.txt"); r.Decision != "allow" || r.Updated["file_path"] != want {
			t.Errorf("Read notes.txt in %s: %+v, want allowed as %s", cwd, r, want)
		}
		g := postHook(t, base, hookInput(cwd, globTexts))
		if allowed := g.Decision == "allow"; allowed != (cwd == a) || cwd == b && !strings.Contains(g.Reason, "Glob") {
			t.Errorf("Glob *.txt in %s: %+v, want it allowed in %s alone", cwd, g, a)
		}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				if (i+j)%2 == 0 {
					check(a)
				} else {
					check(b)
				}
			}
		}()
	}
	wg.Wait()
	file := filepath.Join(a, "notes.txt")
	for _, tc := range []struct{ cwd, says string }{
		{"relative", `the hook input's cwd "relative" is not an absolute directory`},
		{"", "the hook input has no cwd"},
		{filepath.Join(a, "gone"), "is not an absolute directory"},
		{file, "is not an absolute directory"},
	} {
		if r := postHook(t, base, hookInput(tc.cwd, readNotes)); r.Decision != "deny" || !strings.Contains(strings.ToLower(r.Reason), strings.ToLower(tc.says)) {
			t.Errorf("cwd %q: %+v, want a deny saying %q", tc.cwd, r, tc.says)
		}
	}
	// A cwd in a that is a link to b: a's lists name it as written, and
	// b is where a search of it runs, which no list allows (rule R6).
	link := filepath.Join(a, "to-b")
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	if r := postHook(t, base, hookInput(link, globTexts)); r.Decision != "deny" || !strings.Contains(r.Reason, "leads through a symbolic link to "+strconvQuote(b)) {
		t.Errorf("Glob in %s, a link to %s: %+v, want it refused where it leads", link, b, r)
	}
}

// TestR3HTTPHookFollowsTheReload: the HTTP hook's gateway is the
// generation's, so the edit a reload puts in force decides the next
// request: a gateway kept from the first generation would still allow
// what the edit took away.
func TestR3HTTPHookFollowsTheReload(t *testing.T) {
	pol, a, b := hookProjects(t)
	base, gw, dir := serveFront(t, pol)
	if r := postHook(t, base, hookInput(b, readNotes)); r.Decision != "allow" {
		t.Fatalf("Read in %s before the edit: %+v, want it allowed", b, r)
	}
	edited := strings.Replace(pol, fmt.Sprintf(", \"Read(%s/**)\"", b), "", 1)
	if edited == pol {
		t.Fatal("the edit changes nothing")
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); gw.Current().Number < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edit was not put in force within 30 s")
		}
	}
	if r := postHook(t, base, hookInput(b, readNotes)); r.Decision != "deny" {
		t.Errorf("Read in %s after the edit: %+v, want it refused by the policy in force", b, r)
	}
	if r := postHook(t, base, hookInput(a, readNotes)); r.Decision != "allow" {
		t.Errorf("Read in %s after the edit: %+v, want it allowed", a, r)
	}
}

// BenchmarkHTTPHook is one PreToolUse input through the HTTP hook (bearer
// token, principal, the one decision, the record-less answer), two
// projects' inputs in turn, on loopback in this process.
func BenchmarkHTTPHook(b *testing.B) {
	pol, pa, pb := hookProjects(b)
	base, _, _ := serveFront(b, pol)
	inputs := []string{hookInput(pa, readNotes), hookInput(pb, readNotes)}
	for i := 0; b.Loop(); i++ {
		if r := postHook(b, base, inputs[i%2]); r.Decision != "allow" {
			b.Fatalf("%+v", r)
		}
	}
}
