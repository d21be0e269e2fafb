package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"aimon.dev/gw/internal/exec/netproxy"
	"aimon.dev/gw/internal/testkit/need"
)

// needCurl fails the test without curl under CI, and skips it elsewhere.
func needCurl(t *testing.T) {
	t.Helper()
	need.Command(t, "curl", "it reaches the sandbox's proxy; .ci/run installs it")
}

// countingServer answers body to every request and counts them.
func countingServer(t *testing.T, body string) (port string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	return u.Port(), hits
}

// TestR8NetworkByDomain: a Bash whose sandbox lists hosts reaches a listed
// host through the gateway's proxy, by plain HTTP and by CONNECT, and
// nothing else: a name not listed, a listed name at another port, an IP
// literal not listed, a listed name that resolves to a loopback address
// not listed (DNS rebinding), and a connection around the proxy all fail,
// each refusal logged with its host; the command holds no socket of the
// gateway's. As root and as nobody.
func TestR8NetworkByDomain(t *testing.T) {
	t.Parallel()
	needCurl(t)
	allowed, allowedHits := countingServer(t, "allowed-body")
	other, otherHits := countingServer(t, "other-body")
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		allowedHits.Store(0)
		otherHits.Store(0)
		writeFile(t, l.policy+"/policy.cue", fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: network: allow: ["allowed.test:%[1]s", "127.0.0.1:%[1]s", "*.wild.test:%[1]s", "rebind.test"]}
agent: "allowed-tools": ["Bash"]
`, allowed))
		if l.u.uid >= 0 {
			chownAll(t, l.root, l.u.uid, l.u.gid)
		}
		cases := []struct {
			note, command, want string
		}{
			{note: "a listed name, plain HTTP", command: "curl -sS http://allowed.test:" + allowed + "/", want: "allowed-body"},
			{note: "a listed name, CONNECT", command: "curl -sS -p http://allowed.test:" + allowed + "/", want: "allowed-body"},
			{note: "a name under a listed *.DOMAIN", command: "curl -sS http://a.wild.test:" + allowed + "/", want: "allowed-body"},
			{note: "the *.DOMAIN itself", command: "curl -sS http://wild.test:" + allowed + "/", want: "not in the sandbox's network allow list"},
			{note: "a name not listed", command: "curl -sS http://other.test:" + other + "/", want: "other.test:" + other + " is not in the sandbox's network allow list"},
			{note: "a name not listed, CONNECT", command: "curl -sS -p http://other.test:" + other + "/", want: "403"},
			{note: "a listed name at another port", command: "curl -sS http://allowed.test:" + other + "/", want: "not in the sandbox's network allow list"},
			{note: "an IP literal not listed", command: "curl -sS http://127.0.0.1:" + other + "/", want: "the address 127.0.0.1:" + other + " is not in"},
			{note: "an IP literal not listed, CONNECT", command: "curl -sS -p http://127.0.0.1:" + other + "/", want: "403"},
			{note: "a listed name that resolves to loopback", command: "curl -sS http://rebind.test:" + other + "/", want: "resolves to 127.0.0.1, a loopback"},
			{note: "around the proxy", command: "curl -sS --noproxy '*' http://127.0.0.1:" + allowed + "/", want: "Failed to connect"},
			{note: "no socket of the gateway's", command: "ls -l /proc/self/fd/ | grep -c socket", want: "0"},
			{note: "an IPv6 literal not listed", command: "curl -sS http://[::1]:" + other + "/", want: "the address ::1:" + other + " is not in"},
			{note: "IPv6 loopback inside the sandbox", command: `python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0)); s.listen(); socket.create_connection(("::1", s.getsockname()[1])); print("v6 loopback")'`, want: "v6 loopback"},
		}
		var lines []string
		for i, c := range cases {
			lines = append(lines, bashLine(fmt.Sprint(i), c.command))
		}
		var log strings.Builder
		bin := gatewayBinary(t)
		replies := runServeLog(t, append(l.u.prefix, bin), []string{"--policy", l.policy, "--workdir", l.proj},
			[]string{netproxy.TestHostsEnv + "=allowed.test=127.0.0.1,other.test=127.0.0.1,rebind.test=127.0.0.1,a.wild.test=127.0.0.1",
				"HOME=" + l.root + "/home", "XDG_CACHE_HOME=" + l.root + "/home/.cache"}, &log, lines...)
		for i, c := range cases {
			if got := text(replies[i]); !strings.Contains(got, c.want) {
				t.Errorf("%s: %s\nwant %q", c.note, got, c.want)
			}
		}
		if n := allowedHits.Load(); n != 3 {
			t.Errorf("the allowed host had %d requests, want 3", n)
		}
		if n := otherHits.Load(); n != 0 {
			t.Errorf("the other host had %d requests, want none", n)
		}
		for _, host := range []string{"host=other.test", "host=127.0.0.1", "host=rebind.test", "host=wild.test"} {
			if !strings.Contains(log.String(), "the sandbox's network proxy refused a connection") || !strings.Contains(log.String(), host) {
				t.Errorf("the log does not name the refused %s:\n%s", host, log.String())
			}
		}
	})
}

// TestR8NetworkAllowBadInput: vet refuses a host pattern that is not one,
// at its file:line:col, and a network that is neither a bool nor an allow list.
func TestR8NetworkAllowBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ note, network, want string }{
		{note: "a URL", network: `{allow: ["https://api.github.com"]}`, want: `"https://api.github.com" is a URL`},
		{note: "every host", network: `{allow: ["*"]}`, want: "allows every host; write network: true"},
		{note: "a wildcard inside", network: `{allow: ["api.*.com"]}`, want: "* may only be the whole first label"},
		{note: "a port out of range", network: `{allow: ["api.github.com:70000"]}`, want: "not a number from 1 to 65535"},
		{note: "a hyphen", network: `{allow: ["-x.example.com"]}`, want: "starts or ends with a hyphen"},
		{note: "a path", network: `{allow: ["example.com/x"]}`, want: "has no path"},
		{note: "a string alone", network: `"example.com"`, want: "network"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Bash: schema.#Bash & {sandbox: network: "+tc.network+"}\n")
			out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "policy.cue:5:") {
				t.Errorf("vet: %v\n%s\nwant %q at policy.cue:5", err, out, tc.want)
			}
		})
	}
}
