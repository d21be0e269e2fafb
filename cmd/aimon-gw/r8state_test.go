package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestR8StateStoreIsNotWritableByTools: the local state store is the
// gateway's alone, as root and as nobody: with a token spent, the commands
// and tools that try to remove, move or overwrite its records change
// nothing, and the token replayed afterwards still runs nothing.
func TestR8StateStoreIsNotWritableByTools(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		state := l.root + "/home/.local/state/aimon-gw"
		spent := state + "/spent"
		writeFile(t, l.proj+"/ask/a", "the secret\n")
		writeFile(t, l.policy+"/policy.cue", fmt.Sprintf("package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Read: schema.#Read, Write: schema.#Write, Bash: schema.#Bash}\nagent: {\"allowed-tools\": [\"Read(%[1]s/**)\", \"Write(%[1]s/**)\", \"Bash\"], \"ask-tools\": [\"Read(%[2]s/ask/**)\"]}\n", l.root, l.proj))
		key := filepath.Join(l.root, "approval.key")
		writeFile(t, key, strings.Repeat("k", 32))
		os.Chmod(key, 0o600)
		if l.u.uid >= 0 {
			chownAll(t, l.root, l.u.uid, l.u.gid)
		}
		serve := func(lines ...string) []map[string]any {
			return runServeLog(t, append(l.u.prefix, gatewayBinary(t)),
				[]string{"--policy", l.policy, "--workdir", l.proj, "--approval-key", key},
				[]string{"HOME=" + l.root + "/home", "XDG_CACHE_HOME=" + l.root + "/home/.cache", "XDG_STATE_HOME=" + l.root + "/home/.local/state"}, nil, lines...)
		}
		read := map[string]any{"file_path": l.proj + "/ask/a"}
		tok := askToken(t, serve(toolLine("ask", "Read", read))[0])
		if r := serve(approvedRead("approved", l.proj+"/ask/a", tok))[0]; r["is_error"] != false {
			t.Fatalf("the approved call must run: %v", r)
		}
		before, err := os.ReadDir(spent)
		if err != nil || len(before) == 0 {
			t.Fatalf("no spent record in %s: %v", spent, err)
		}
		record := spent + "/" + before[0].Name()
		replies := serve(
			bashLine("remove", "rm -rf "+spent+"/*"),
			bashLine("move", "mv "+spent+" "+spent+".old"),
			bashLine("move-parent", "mv "+state+" "+state+".old && mkdir -p "+spent),
			bashLine("chmod", "chmod 0777 "+spent),
			toolLine("write", "Write", map[string]any{"file_path": record, "content": "x"}),
			approvedRead("replayed", l.proj+"/ask/a", tok))
		if r := replies[4]; r["is_error"] != true {
			t.Errorf("Write into the state store must be refused: %v", r)
		}
		if r := replies[5]; r["is_error"] != true || !strings.Contains(text(r), "already used") {
			t.Errorf("the token replayed after the commands must run nothing: %v", r)
		}
		after, err := os.ReadDir(spent)
		if err != nil || len(after) != len(before) {
			t.Errorf("the commands changed the state store: %d records before, %d after (%v): %v", len(before), len(after), err, replies[:4])
		}
		if _, err := os.Stat(state + ".old"); err == nil {
			t.Errorf("a command moved the state directory: %v", replies[2])
		}
	})
}
