package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"aimon.dev/gw/internal/exec/sandbox/trace"
	"aimon.dev/gw/tools"
	"golang.org/x/sys/unix"
)

// withTrace makes cmd start under the tracer (package trace), which asks
// j about each program the command starts (rule P16). decided are the
// execs after cmd's own that start the command: already decided.
func withTrace(cmd *exec.Cmd, j *tools.ExecJudge, decided []string) error {
	exe, err := Launcher()
	if err != nil {
		return fmt.Errorf("the gateway's own binary, which watches a sandbox's programs, cannot be found: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "trace-control"), os.NewFile(uintptr(pair[1]), "trace-control")
	spec := trace.Spec{Decided: decided}
	for _, n := range j.Names {
		if p, ok := execProgram(n); ok {
			spec.Programs = append(spec.Programs, p)
		}
	}
	b, _ := json.Marshal(spec)
	if _, err := ours.Write(append(b, '\n')); err != nil {
		ours.Close()
		theirs.Close()
		return err
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
	cmd.Args = slices.Concat([]string{exe, trace.Arg, strconv.Itoa(fd), cmd.Path, "--"}, cmd.Args)
	cmd.Path = exe
	// The tracer is the command's parent instead of the gateway, so bwrap's
	// --die-with-parent no longer ends it with the gateway: the tracer ends
	// with it (its death kills every traced process, PTRACE_O_EXITKILL).
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	go serveTrace(ours, j)
	return nil
}

// execProgram is the file name resolves to on PATH, by what it is.
func execProgram(name string) (trace.Program, bool) {
	p, err := exec.LookPath(name)
	if err != nil {
		return trace.Program{}, false
	}
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return trace.Program{}, false
	}
	f, err := os.Open(p)
	if err != nil {
		return trace.Program{}, false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return trace.Program{}, false
	}
	return trace.Program{Name: name, Dev: st.Dev, Ino: st.Ino, Size: st.Size, SHA256: hex.EncodeToString(h.Sum(nil))}, true
}

// serveTrace answers the tracer's questions until the command ends.
func serveTrace(c *os.File, j *tools.ExecJudge) {
	defer c.Close()
	in := bufio.NewReader(c)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var r trace.Request
		why := "its request could not be read"
		if json.Unmarshal(line, &r) == nil {
			why = r.Refused
			if why == "" {
				why = judge(j, r.Words)
			}
		}
		if why != "" {
			if len(r.Argv) > 0 && len(r.Words) > 0 && r.Argv[0] != r.Words[0] && r.Argv[0] != r.Exe {
				// A link, a copy or a loader: say what it really was.
				why += fmt.Sprintf(" It was started as %s, the file %s.", r.Argv[0], r.Exe)
			}
			j.Note(why)
			// Recorded before the tracer is answered: the refusal is in
			// the decision log before the program is killed (rule R10).
			if j.Refused != nil {
				j.Refused(r.Words, r.Exe, r.Argv, why)
			}
		}
		if _, err := c.Write(append([]byte(singleLine(why)), '\n')); err != nil {
			return
		}
	}
}

// judge is why words may not run: "" when they may.
func judge(j *tools.ExecJudge, words []string) string {
	why, ask := j.Decide(words)
	if why == "" || !ask {
		return why
	}
	for _, a := range j.Approved {
		if slices.Equal(a, words) || len(a) > 0 && len(words) > 0 && filepath.Base(a[0]) == words[0] && slices.Equal(a[1:], words[1:]) {
			return ""
		}
	}
	return why + " It was not approved as this call: ask for it as a call of its own."
}

func singleLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
