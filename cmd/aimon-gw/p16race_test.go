package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/need"
)

// p16Racer execs touch, in each of n children, with an argument another
// thread keeps rewriting between "okay" and "mark" while the exec copies
// it: a judgement that read the argument before the kernel did could let
// "touch mark" run as "touch okay".
const p16Racer = `#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

static char arg[5] = "okay";

static void *flip(void *unused) {
	volatile char *a = arg;
	for (;;) {
		a[0] = 'm'; a[1] = 'a'; a[2] = 'r'; a[3] = 'k';
		a[0] = 'o'; a[1] = 'k'; a[2] = 'a'; a[3] = 'y';
	}
	return unused;
}

int main(int argc, char **argv) {
	int n = atoi(argv[1]);
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			pthread_t t;
			pthread_create(&t, 0, flip, 0);
			for (volatile int spin = 0; spin < 1000 * (i % 50); spin++)
				;
			char *av[] = {"touch", arg, 0};
			execv(argv[2], av);
			_exit(127);
		}
		int st;
		waitpid(p, &st, 0);
	}
	return 0;
}
`

// p16RacerBinary compiles p16Racer with gcc into dir.
func p16RacerBinary(t *testing.T, dir string) string {
	t.Helper()
	gcc := need.Command(t, "gcc", "it builds the racing program; .ci/run installs it")
	src := filepath.Join(dir, "racer.c")
	writeFile(t, src, p16Racer)
	bin := filepath.Join(dir, "racer")
	if out, err := exec.Command(gcc, "-O2", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// TestP16ExecJudgementCannotBeRaced: with Bash(touch mark:*) denied, a
// program whose other thread rewrites the argument vector while it execs
// touch never gets "touch mark" to run, as root and as nobody: what is
// judged is the argument vector the new image has, which no other thread
// can reach (the exec stop comes after de_thread and exec_mmap), so the
// words judged are the words that run. "touch okay" still runs.
func TestP16ExecJudgementCannotBeRaced(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			e := p16Layout(t, u, `agent: "denied-tools": ["Bash(touch mark:*)"]`)
			// Outside what a command may write: the policy's own program,
			// not one the agent wrote.
			racer := p16RacerBinary(t, e.root)
			if u.uid >= 0 {
				chownAll(t, e.root, u.uid, u.gid)
			}
			touch, err := exec.LookPath("touch")
			if err != nil {
				t.Fatal(err)
			}
			r := p16Serve(t, e, []string{"race"}, []string{fmt.Sprintf("%s 400 %s", racer, touch)})[0]
			if _, err := os.Stat(filepath.Join(e.proj, "mark")); err == nil {
				t.Fatalf("touch mark ran: the argument was rewritten after it was judged: %v", r)
			}
			if _, err := os.Stat(filepath.Join(e.proj, "okay")); err != nil {
				t.Errorf("touch okay, which no entry denies, never ran: %v; the call returned %v", err, r)
			}
			// Each refusal the race won names the words that would have run.
			if r.isError && !strings.Contains(r.text, "touch mark is denied") {
				t.Errorf("a refusal that does not name touch mark: %v", r)
			}
			t.Logf("refused: %v", strings.Count(r.text, "touch mark is denied"))
		})
	}
}
