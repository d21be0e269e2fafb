package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// longListPolicy is a policy whose main agent and skill each list n Bash
// and n Read entries: the chain agent > skill:long meets 2n + 2n entries.
func longListPolicy(t *testing.T, n int) string {
	var agent, skill []string
	for i := range n {
		agent = append(agent, fmt.Sprintf("%q, %q", fmt.Sprintf("Bash(tool%d:*)", i), fmt.Sprintf("Read(/srv/d%d/**)", i)))
		skill = append(skill, fmt.Sprintf("%q, %q", fmt.Sprintf("Bash(tool%d run:*)", i), fmt.Sprintf("Read(/srv/d%d/docs/**)", i)))
	}
	return moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: {
	Bash: schema.#Bash & {sandbox: mode: "off"}
	Read: schema.#Read
}
agent: "allowed-tools": [`+strings.Join(agent, ",\n")+`]
skills: long: "allowed-tools": [`+strings.Join(skill, ",\n")+`]
`)
}

// TestP10LongListsOnAChain: 1,000 + 1,000 entries per tool on a chain load,
// decide and vet through the binary within the default --load-timeout
// (the meet is linear in the entries), and a refusal names a bounded
// number of them.
func TestP10LongListsOnAChain(t *testing.T) {
	t.Parallel()
	dir := longListPolicy(t, 1000)
	bin := gatewayBinary(t)
	check := func(call string) map[string]any {
		t.Helper()
		out, err := exec.Command(bin, "check", "--policy", dir, "--surface", "skill:long", call).Output()
		var d map[string]any
		if jerr := json.Unmarshal(out, &d); jerr != nil {
			t.Fatalf("check %s: %v, output %q (%v)", call, jerr, out, err)
		}
		return d
	}
	d := check(`{"type":"tool_use","id":"1","name":"Bash","input":{"command":"tool917 run --all"}}`)
	if d["allowed"] != true || !strings.Contains(fmt.Sprint(d["entries"]), "Bash(tool917 run:*)") {
		t.Errorf("an allowed call: %v", d)
	}
	d = check(`{"type":"tool_use","id":"2","name":"Read","input":{"file_path":"/srv/d500/src/x.go"}}`)
	reason, _ := d["reason"].(string)
	if d["allowed"] != false || !strings.Contains(reason, "Read(/srv/d500/docs/**)") || !strings.Contains(reason, "more") || len(reason) > 2000 {
		t.Errorf("a refused call: the reason (%d bytes) must name the closest entry and say how many more: %v", len(reason), d)
	}
	var vetOut bytes.Buffer
	vet := exec.Command(bin, "vet", dir)
	vet.Stdout, vet.Stderr = &vetOut, &vetOut
	if err := vet.Run(); err != nil || strings.Contains(vetOut.String(), "R5") {
		t.Errorf("vet: %v\n%s", err, vetOut.String())
	}
	s := exec.Command(bin, "serve", "--policy", dir, "--surface", "skill:long")
	s.Stdin = strings.NewReader(`{"type":"tool_use","id":"s","name":"Read","input":{"file_path":"/srv/d3/docs/none"}}` + "\n")
	out, err := s.Output()
	if err != nil || !strings.Contains(string(out), `"tool_use_id":"s"`) || strings.Contains(string(out), "not allowed") {
		t.Errorf("serve: %v, %s", err, out)
	}
}

// stuckPolicy takes minutes to evaluate, in little memory.
const stuckPolicy = `package policy

import (
	"list"
	"aimon.dev/gw/schema"
)

tools: Echo: schema.#Echo
_slow: [for i in list.Range(0, 20000, 1) for j in list.Range(0, 20000, 1) if i*j < 0 {i}]
`

// TestR5SIGTERMStopsALoad: a gateway stuck in a load far within its bound
// stops on SIGTERM and says why, for serve and mcp.
func TestR5SIGTERMStopsALoad(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, stuckPolicy)
	for _, cmdName := range []string{"serve", "mcp"} {
		t.Run(cmdName, func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), cmdName, "--policy", dir, "--load-timeout", "1h", "--log-level", "debug")
			stderr, _ := cmd.StderrPipe()
			cmd.StdinPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stderr)
			for sc.Scan() && !strings.Contains(sc.Text(), "loading the policy") {
			}
			cmd.Process.Signal(syscall.SIGTERM)
			var rest strings.Builder
			for sc.Scan() {
				rest.WriteString(sc.Text() + "\n")
			}
			exits(t, cmd, 10*time.Second)
			if !strings.Contains(rest.String(), "stopped") {
				t.Errorf("stderr after SIGTERM does not say the load was stopped:\n%s", rest.String())
			}
		})
	}
}
