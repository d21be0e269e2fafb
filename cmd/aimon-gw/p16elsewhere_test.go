package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestP16NothingWrittenByAnotherCallRuns: a program the agent wrote in the
// project does not run in a command of a subagent that may write only
// below it (rule P16; probe P10: the execute refusal came from the call's
// own writable paths, so the subagent ran the agent's copy of a denied
// touch, one byte longer, and made its marker). Through serve, as root and
// as nobody: the agent's copy fails on its own surface and on the
// subagent's, no marker is made, and the subagent still runs the system's
// programs and writes where it may.
func TestP16NothingWrittenByAnotherCallRuns(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			root, err := os.MkdirTemp("/var/tmp", "aimon-gw-p16else")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			proj := root + "/proj"
			writeFile(t, proj+"/out/.keep", "")
			writeFile(t, proj+"/mkbin.py", "import shutil\nb = open(shutil.which('touch'), 'rb').read() + b'\\0agent'\nopen('t2', 'wb').write(b)\nimport os; os.chmod('t2', 0o755); print('made t2')\n")
			writeFile(t, proj+"/ok.py", "open('out/ok', 'w').write('ran'); print('ran')\n")
			policy := root + "/policy"
			policydir.WriteIn(t, policy, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Bash: schema.#Bash, Write: schema.#Write}
agent: {"allowed-tools": ["Read", "Bash", "Write(%[1]s/**)"], "denied-tools": ["Bash(touch:*)"]}
subagents: runner: "allowed-tools": ["Read", "Bash", "Write(%[1]s/out/**)"]
validation: "enforce"
`, proj)})
			openToNobody(root, proj)
			runner := []string{"agent", "subagent:runner"}
			lines := []string{
				bashLine("make", "python3 mkbin.py"),
				bashLine("agent runs it", "./t2 out/m_agent"),
				p18Line("runner runs it", "Bash", map[string]any{"command": proj + "/t2 " + proj + "/out/m_sub"}, runner...),
				p18Line("runner runs the system's", "Bash", map[string]any{"command": "python3 ok.py"}, runner...),
			}
			bin := append(append([]string{}, u.prefix...), gatewayBinary(t))
			replies := runServeAs(t, bin, []string{"--policy", policy, "--workdir", proj}, nil, lines...)
			if len(replies) != len(lines) {
				t.Fatalf("%d replies to %d calls: %v", len(replies), len(lines), replies)
			}
			text := func(i int) string { return fmt.Sprint(replies[i]["content"]) }
			if !strings.Contains(text(0), "made t2") || !exists(proj+"/t2") {
				t.Fatalf("the agent's program was not written (the layout is wrong): %s", text(0))
			}
			if exists(proj + "/out/m_agent") {
				t.Errorf("the agent ran the program it wrote: %s", text(1))
			}
			if exists(proj + "/out/m_sub") {
				t.Errorf("the subagent ran the program the agent wrote, where it may not write itself: %s", text(2))
			}
			if !strings.Contains(text(3), "ran") || !exists(proj+"/out/ok") {
				t.Errorf("the subagent could not run the system's programs or write where it may: %s", text(3))
			}
		})
	}
}
