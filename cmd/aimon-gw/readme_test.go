package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// readmeFixtures are the files the README's examples name that are not in
// the repository: the policy of the misspelt-key example, whole.
const readmeFixtures = `-- readme/cue.mod/module.cue --
module: "example.com/readme@v0"
language: version: "v0.12.0"
-- readme/policy.cue --
package policy

import "aimon.dev/gw/schema"

tools: Read: schema.#Read
agent: allowedTools: ["Read"]
`

// readmeExample is one "$ command" of the README with the output it shows.
type readmeExample struct {
	line    int
	command string
	output  []string
}

// readmeExamples reads the shell examples of the README's indented
// blocks: a line starting "$ ", its continuation lines (ending in \), and
// the output lines up to the next command or the block's end.
func readmeExamples(text string) []readmeExample {
	var out []readmeExample
	var cur *readmeExample
	continued := false
	for i, line := range strings.Split(text, "\n") {
		body, indented := strings.CutPrefix(line, "    ")
		switch {
		case !indented:
			cur, continued = nil, false
		case continued:
			cur.command += "\n" + body
			continued = strings.HasSuffix(body, `\`)
		case strings.HasPrefix(body, "$ "):
			out = append(out, readmeExample{line: i + 1, command: strings.TrimPrefix(body, "$ ")})
			cur = &out[len(out)-1]
			continued = strings.HasSuffix(body, `\`)
		case cur != nil:
			cur.output = append(cur.output, body)
		}
	}
	return out
}

// TestREADMEExamples runs the README's shell examples under testscript,
// from a directory where the repository's examples are where the README
// says, and compares what they print with what the README shows: all of
// it, or, where the README elides ("..."), each line it shows, in place
// (issue 33). An example that drifts from the binary fails here.
func TestREADMEExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := readmeExamples(string(readme))
	if len(examples) < 4 {
		t.Fatalf("found %d shell examples in the README; the reader lost them", len(examples))
	}
	var script, files strings.Builder
	script.WriteString("symlink examples -> $REPO/examples\nsymlink cue.mod -> $REPO/cue.mod\nsymlink schema -> $REPO/schema\n")
	for i, ex := range examples {
		fmt.Fprintf(&script, "\n# README.md:%d\n", ex.line)
		// The examples show output, not exit codes (vet and check exit 1
		// on a finding).
		command := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(ex.command, "") // one line, as bash reads it
		fmt.Fprintf(&script, "exec bash -c %s\n", scriptQuote(command+" || true"))
		if !strings.Contains(strings.Join(ex.output, "\n"), "...") {
			fmt.Fprintf(&script, "cmp stdout want%d\n", i)
			fmt.Fprintf(&files, "-- want%d --\n%s\n", i, strings.Join(ex.output, "\n"))
			continue
		}
		for _, l := range ex.output {
			if strings.TrimSpace(l) != "..." {
				fmt.Fprintf(&script, "stdout %s\n", scriptQuote("^"+regexp.QuoteMeta(l)+"$"))
			}
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "readme.txtar"), []byte(script.String()+"\n"+files.String()+readmeFixtures), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{Dir: dir, Setup: scriptSetup(t)})
}

// scriptQuote quotes s as one testscript argument.
func scriptQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestREADMEExamplesReader: the reader of the README's examples.
func TestREADMEExamplesReader(t *testing.T) {
	t.Parallel()
	got := readmeExamples("text\n\n    $ a \\\n        b\n    out 1\n    out 2\n    $ c\n\nprose\n    plain block\n")
	want := []readmeExample{{3, "a \\\n    b", []string{"out 1", "out 2"}}, {7, "c", nil}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
