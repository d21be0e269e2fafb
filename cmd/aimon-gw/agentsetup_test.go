package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readmeSetup is the n-th fenced block of lang in the README's section
// heading (an agent's setup), with the names it uses for the gateway,
// its policies and its URL replaced as the test runs them: the tests of
// the real CLIs run the configuration the README gives, as written.
func readmeSetup(t *testing.T, heading, lang string, n int, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## "+heading+"\n")
	if start < 0 {
		t.Fatalf("the README has no section %q", heading)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	blocks := regexp.MustCompile("(?s)\n```"+regexp.QuoteMeta(lang)+"\n(.*?)\n```\n").FindAllStringSubmatch(section, -1)
	if n >= len(blocks) {
		t.Fatalf("the README's section %q has %d %s blocks, not %d", heading, len(blocks), lang, n+1)
	}
	return strings.NewReplacer(replace...).Replace(blocks[n][1])
}

// agentMCPPolicy is the policy of the aimon-gw MCP server the agents'
// tests call: Echo with a bound the gate enforces, and Bash for sleep,
// to be cancelled; alice may call it over HTTP.
const agentMCPPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {
	Echo: schema.#Echo & {input: times?: >=1 & <=5}
	Bash: schema.#Bash & {sandbox: mode: "off"}
}
validation: "enforce"
mcp: clientParameters: ["wait_for_previous"]
agent: "allowed-tools": ["Echo", "Bash(sleep:*)"]
principals: alice: {subject: "alice", surface: ["agent"]}
`

// sleeper watches for the process whose command line holds marker while
// a CLI runs, and keeps its pid: a cancelled call's command must be gone
// once the CLI has given up on it, whatever it is called by then.
type sleeper struct {
	marker string
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	pids   []int
}

func watchFor(marker string) *sleeper {
	s := &sleeper{marker: marker, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			for _, p := range marked(marker) {
				if pid, err := strconv.Atoi(p); err == nil {
					s.mu.Lock()
					if !slices.Contains(s.pids, pid) {
						s.pids = append(s.pids, pid)
					}
					s.mu.Unlock()
				}
			}
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

// gone stops watching and checks that the command ran and that each of
// its processes is gone within 2 s: signal 0 finds no such pid.
func (s *sleeper) gone(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pids) == 0 {
		t.Fatalf("no process of %q ever ran", s.marker)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range s.pids {
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d of the cancelled call %q still runs 2 s after the CLI gave up on it", pid, s.marker)
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// zombie says pid has exited and waits only for its parent to reap it.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// kvArgs is a call's arguments from alternating names and values.
func kvArgs(kv ...any) map[string]any {
	args := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	return args
}

// wantSaid checks that what a CLI sent its model back for each call of
// key (said, by the harness's call id) holds the sentence given for it.
func wantSaid(t *testing.T, key string, id func(string, int, int) string, said func(string) string, want map[[2]int]string) {
	t.Helper()
	for at, says := range want {
		if got := said(id(key, at[0], at[1])); !strings.Contains(got, says) {
			t.Errorf("%s turn %d call %d: the model got %q, want %q in it", key, at[0], at[1], got, says)
		}
	}
}

// wantExist checks which of the paths exist after a run: the effect of
// what the gate allowed and refused, on disk.
func wantExist(t *testing.T, want map[string]bool) {
	t.Helper()
	for name, exists := range want {
		if _, err := os.Stat(name); (err == nil) != exists {
			t.Errorf("%s: exists %v, want %v", name, err == nil, exists)
		}
	}
}
