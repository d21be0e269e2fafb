package provision

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/tools"
)

// TestS3HeadersNeverFollowARedirectToAnotherOrigin: an HTTP server that
// redirects to another origin has its tools withheld, saying so, and the
// other origin never receives the server's headers (issue 29).
func TestS3HeadersNeverFollowARedirectToAnotherOrigin(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer other.Close()
	first := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	defer first.Close()
	t.Setenv("AIMON_TEST_TOKEN", "s3cret")
	up := &Upstreams{}
	defer up.Close()
	b, err := up.Bind(context.Background(), &policy.Tool{Name: "web__echo", Upstream: &policy.Upstream{Server: "web", Tool: "echo",
		URL: first.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${AIMON_TEST_TOKEN}"}, NoPin: true}})
	if why := unavailable(b, err); err != nil || !strings.Contains(why, "another origin") {
		t.Fatalf("Bind = %v, withheld for %q; want it withheld for the redirect to another origin", err, why)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range seen {
		if strings.Contains(h, "s3cret") {
			t.Fatalf("the other origin received the header %q", h)
		}
	}
}

// TestR6StdioServerEnvironmentIsCleared: a stdio server sees PATH and the
// like, and what its env sets (${NAME} from the gateway's environment),
// never the gateway's other variables; env naming a variable that is not
// set withholds the server's tools (issue 29).
func TestR6StdioServerEnvironmentIsCleared(t *testing.T) {
	bin := fsServer(t)
	t.Setenv("AIMON_TEST_SECRET", "hunter2")
	t.Setenv("AIMON_TEST_PASSED", "given")
	for _, tc := range []struct {
		note     string
		env      map[string]string
		has, not []string
		withheld string
	}{
		{"nothing set", nil, []string{"PATH="}, []string{"AIMON_TEST_SECRET", "hunter2", "AIMON_TEST_PASSED"}, ""},
		{"set, literally and from the gateway", map[string]string{"AIMON_TEST_LITERAL": "x", "AIMON_TEST_GIVEN": "${AIMON_TEST_PASSED}"},
			[]string{"PATH=", "AIMON_TEST_LITERAL=x", "AIMON_TEST_GIVEN=given"}, []string{"AIMON_TEST_SECRET", "hunter2"}, ""},
		{"a variable that is not set", map[string]string{"TOKEN": "${AIMON_TEST_UNSET}"}, nil, nil, "names ${AIMON_TEST_UNSET}, which is not set"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			up := &Upstreams{}
			defer up.Close()
			b := bind(t, up, fsTool(bin, "read_file", tc.env))
			if why := unavailable(b, nil); !strings.Contains(why, tc.withheld) || (why == "") != (tc.withheld == "") {
				t.Fatalf("withheld for %q, want %q", why, tc.withheld)
			}
			if tc.withheld != "" {
				return
			}
			r := b.Tool.Run(context.Background(), nil, tools.Input{"path": "/proc/self/environ"})
			if r.IsError {
				t.Fatalf("reading the server's environment: %+v", r)
			}
			for _, s := range tc.has {
				if !strings.Contains(r.Text, s) {
					t.Errorf("the server's environment lacks %q", s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(r.Text, s) {
					t.Errorf("the server's environment holds %q", s)
				}
			}
		})
	}
}

// TestR5SecretsFromAKubernetesSecretMount: --secrets laid out as the
// kubelet mounts a Secret per name (each key a link through ..data to a
// timestamped directory, swapped whole on an update) gives a caller its
// own secret, or its group's, and the new value once the Secret changes;
// a caller with neither gets a sentence naming what is missing.
func TestR5SecretsFromAKubernetesSecretMount(t *testing.T) {
	dir := t.TempDir()
	mount := filepath.Join(dir, "vault")
	update := func(stamp string, files map[string]string) {
		t.Helper()
		ts := filepath.Join(mount, stamp)
		if err := os.MkdirAll(ts, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range files {
			if err := os.WriteFile(filepath.Join(ts, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Symlink(filepath.Join("..data", name), filepath.Join(mount, name)) // made once, as the kubelet does
		}
		// The kubelet's atomic swap: a new link renamed over ..data.
		if err := os.Symlink(stamp, filepath.Join(mount, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	update("..2026_12_03_10_00_00.000000001", map[string]string{"user.alice": "alice-1\n", "group.reviewers": "reviewers-1"})
	u := &Upstreams{Secrets: dir}
	for _, tc := range []struct {
		c          policy.Claims
		want, from string
	}{
		{policy.Claims{Subject: "alice"}, "alice-1", "user.alice"},
		{policy.Claims{Subject: "rita", Groups: []string{"staff", "reviewers"}}, "reviewers-1", "group.reviewers"},
	} {
		if v, from, err := u.secretFor("vault", &tc.c); err != nil || v != tc.want || from != tc.from {
			t.Errorf("%s: %q from %q, %v; want %q from %q", tc.c, v, from, err, tc.want, tc.from)
		}
	}
	update("..2026_12_03_11_00_00.000000002", map[string]string{"user.alice": "alice-2", "group.reviewers": "reviewers-2"})
	if v, _, err := u.secretFor("vault", &policy.Claims{Subject: "alice"}); err != nil || v != "alice-2" {
		t.Errorf("after the Secret changed: %q, %v; want alice-2", v, err)
	}
	if _, _, err := u.secretFor("vault", &policy.Claims{Subject: "bob", Groups: []string{"staff"}}); err == nil || !strings.Contains(err.Error(), "no secret vault in "+dir+" for user.bob or its groups") {
		t.Errorf("bob, with none: %v", err)
	}
}
