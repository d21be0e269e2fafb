package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestP16ProgramsMadeInMemoryDoNotRun: a program a command copies into a
// memfd and executes from it, which no mount or Landlock rule governs, is
// refused where it starts, as root and as nobody, however harmless the
// program (mkdir, allowed by the lists).
func TestP16ProgramsMadeInMemoryDoNotRun(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	mkdir, err := exec.LookPath("mkdir")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			e := p16Layout(t, u, p16Lists)
			proj := e.proj
			writeFile(t, proj+"/m.py", fmt.Sprintf(`import os
fd = os.memfd_create("m")
os.write(fd, open(%q, "rb").read())
os.execv("/proc/self/fd/%%d" %% fd, ["mkdir", "memfdmark"])
`, mkdir))
			if u.uid >= 0 {
				chownAll(t, proj, u.uid, u.gid)
			}
			replies := runServeAs(t, e.bin(t), e.serveArgs(), e.env,
				bashLine("memfd", "python3 m.py"), bashLine("control", "mkdir controlmark"))
			if s := fmt.Sprint(replies[0]["content"]); replies[0]["is_error"] != true || !strings.Contains(s, "made in memory") {
				t.Errorf("the memfd program's call: %v", replies[0])
			}
			if _, err := os.Stat(proj + "/memfdmark"); err == nil {
				t.Error("a program made in memory ran")
			}
			if _, err := os.Stat(proj + "/controlmark"); err != nil {
				t.Errorf("mkdir itself did not run: %v %v", err, replies[1])
			}
		})
	}
}
