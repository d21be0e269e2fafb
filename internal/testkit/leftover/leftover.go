// Package leftover removes, after a test run, the machine-wide directories
// the gateway makes on its own and that did not exist before the run: the
// runtimes' system gate directories, made before a sandbox whose commands
// could make them (rule R9), and nobody's ticket key directory.
package leftover

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dirs are the directories a run as root can leave behind: nobody (65534)
// has no home, so its key is kept in /var/tmp.
func Dirs() []string {
	return []string{"/etc/claude-code", "/etc/codex", "/etc/gemini-cli", fmt.Sprintf("/var/tmp/aimon-gw-%d", 65534)}
}

// Watch notes which of Dirs are absent now; the function it returns removes
// those that exist then. A gate directory is removed only while empty, so
// nothing a test put in one by mistake is lost unseen.
func Watch() func() {
	var absent []string
	for _, d := range Dirs() {
		if _, err := os.Lstat(d); os.IsNotExist(err) {
			absent = append(absent, d)
		}
	}
	return func() {
		for _, d := range absent {
			if filepath.Dir(d) == "/etc" {
				os.Remove(d)
			} else {
				os.RemoveAll(d)
			}
		}
	}
}
