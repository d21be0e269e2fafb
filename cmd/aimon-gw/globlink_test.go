package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestR6GlobWalksNoLinkOutOfTheList: a directory link inside the tree
// Glob and Grep may search, leading outside it, takes neither `**` nor a
// pattern through the link, nor Grep's walk, to the names and content
// there (rule R6, issue 41 item 7).
func TestR6GlobWalksNoLinkOutOfTheList(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj, outside := root+"/proj", root+"/outside"
	writeFile(t, proj+"/a.txt", "inside\n")
	writeFile(t, outside+"/secretname.txt", "outside-words\n")
	writeFile(t, outside+"/deep/deepname.txt", "outside-words\n")
	if err := os.Symlink(outside, proj+"/gs"); err != nil {
		t.Fatal(err)
	}
	policydir.WriteIn(t, root+"/policy", map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Glob: schema.#Glob, Grep: schema.#Grep}
agent: "allowed-tools": ["Glob(%[1]s/**)", "Grep(%[1]s/**)"]
`, proj)})
	var lines []string
	for i, p := range []string{"**", "**/*name*", "gs/**", "*/*", "gs/deep/*"} {
		lines = append(lines, toolUse(fmt.Sprint("glob", i), "Glob", map[string]any{"pattern": p, "path": proj}))
	}
	lines = append(lines, toolUse("grep", "Grep", map[string]any{"pattern": "words|inside", "path": proj, "output_mode": "content"}))
	replies := runServeAs(t, []string{gatewayBinary(t)}, []string{"--policy", root + "/policy", "--workdir", proj}, nil, lines...)
	if len(replies) != len(lines) {
		t.Fatalf("%d replies to %d calls: %v", len(replies), len(lines), replies)
	}
	for i, r := range replies {
		if s := fmt.Sprint(r["content"]); strings.Contains(s, "name.txt") || strings.Contains(s, "outside-words") {
			t.Errorf("call %d reached through the link out of the list: %s", i, s)
		}
	}
	if s := fmt.Sprint(replies[0]["content"], replies[5]["content"]); !strings.Contains(s, "a.txt") || !strings.Contains(s, "inside") {
		t.Errorf("Glob ** or Grep missed what the list allows: %v %v", replies[0], replies[5])
	}
}
