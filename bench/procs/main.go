// Command procs times whole processes: each named command runs -n times,
// interleaved round by round, with a file on standard input (-in, or its
// own after <), and procs prints each one's median and its ratio to the
// first, the median of its ratios to its anchor (the first command, or
// the one -anchor NAME=ANCHOR names) round by round, of wall and of
// processor time (on a shared machine the load moves within seconds, and
// a round's commands run within one another's), the median time from exec
// to its first line of output (a
// server's first answer, such as its tool list), and the medians of its
// processor time and its peak resident memory (bench/hook.sh,
// bench/scale.sh). A command that is a URL is not a process: each round
// POSTs its input there, on one kept-alive connection, with the bearer
// token of $PROCS_BEARER, and its row is the round trip to the answer's
// end (Claude Code's HTTP hook beside the command hook).
//
//	procs -n 50 -in input.json 'floor=./floor' 'hook=./aimon-gw hook claude-code' 'check<call.json=./aimon-gw check -' 'http=http://127.0.0.1:8443/hooks/claude-code'
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 50, "runs of each command")
	in := flag.String("in", "", "file given to every run on standard input")
	anchors := map[string]string{}
	flag.Func("anchor", "NAME=ANCHOR: the command NAME's ratios round by round are to ANCHOR's (default: the first command's)", func(s string) error {
		name, anchor, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%q is not NAME=ANCHOR", s)
		}
		anchors[name] = anchor
		return nil
	})
	flag.Parse()
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "procs:", err)
			os.Exit(2)
		}
		return data
	}
	input := read(*in)
	type cmd struct {
		name  string
		argv  []string
		input []byte
		runs  []time.Duration
		first []time.Duration // exec to the first line of standard output
		rss   []time.Duration // peak resident KiB, kept as a duration to share median
		cpu   []time.Duration // processor time, user and system
	}
	var cmds []*cmd
	for _, a := range flag.Args() {
		name, line, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "procs: %q is not NAME=COMMAND\n", a)
			os.Exit(2)
		}
		c := &cmd{name: name, argv: strings.Fields(line), input: input}
		if n, file, ok := strings.Cut(name, "<"); ok {
			c.name, c.input = n, read(file)
		}
		cmds = append(cmds, c)
	}
	for r := 0; r < *n+2; r++ {
		for _, c := range cmds {
			if strings.HasPrefix(c.argv[0], "http://") || strings.HasPrefix(c.argv[0], "https://") {
				d := post(c.argv[0], c.input)
				if r >= 2 {
					c.runs, c.first = append(c.runs, d), append(c.first, d)
				}
				continue
			}
			x := exec.Command(c.argv[0], c.argv[1:]...)
			x.Stdin = bytes.NewReader(c.input)
			x.Stderr = os.Stderr
			out, err := x.StdoutPipe()
			if err != nil {
				fmt.Fprintln(os.Stderr, "procs:", err)
				os.Exit(2)
			}
			t0 := time.Now()
			var first time.Duration
			if err = x.Start(); err == nil {
				first = firstLine(out, t0)
				err = x.Wait()
			}
			d := time.Since(t0)
			if err != nil && (x.ProcessState == nil || x.ProcessState.ExitCode() != 1) { // 1: a finding, such as a denial
				fmt.Fprintf(os.Stderr, "procs: %s: %v\n", c.name, err)
				os.Exit(1)
			}
			if r >= 2 { // two warm-up rounds
				c.runs = append(c.runs, d)
				c.first = append(c.first, first)
				if ru, ok := x.ProcessState.SysUsage().(*syscall.Rusage); ok {
					c.rss = append(c.rss, time.Duration(ru.Maxrss))
				}
				c.cpu = append(c.cpu, x.ProcessState.UserTime()+x.ProcessState.SystemTime())
			}
		}
	}
	byName := map[string]*cmd{}
	for _, c := range cmds {
		byName[c.name] = c
	}
	base := median(cmds[0].runs)
	for _, c := range cmds {
		m := median(c.runs)
		a := cmds[0]
		if name, ok := anchors[c.name]; ok && byName[name] != nil {
			a = byName[name]
		}
		rest := fmt.Sprintf("   round %6.2f× %-12s", perRound(c.runs, a.runs), a.name)
		if len(c.cpu) > 0 && len(a.cpu) > 0 {
			rest += fmt.Sprintf("   cpu %8.2f ms %6.2f×", float64(median(c.cpu))/1e6, perRound(c.cpu, a.cpu))
		}
		rest += fmt.Sprintf("   first line %8.2f ms", float64(median(c.first))/1e6)
		if len(c.rss) > 0 {
			rest += fmt.Sprintf("   peak RSS %6.1f MiB", float64(median(c.rss))/1024)
		}
		fmt.Printf("%-14s median %8.2f ms   %6.2f× %s%s\n", c.name, float64(m)/1e6, float64(m)/float64(base), cmds[0].name, rest)
	}
}

// perRound is the median of the ratios of xs to as, round by round.
func perRound(xs, as []time.Duration) float64 {
	r := make([]float64, len(xs))
	for i := range xs {
		r[i] = float64(xs[i]) / float64(as[i])
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// post POSTs input to url and returns how long the answer took to its
// end; any answer but 200 ends the run.
func post(url string, input []byte) time.Duration {
	req, err := http.NewRequest("POST", url, bytes.NewReader(input))
	if err != nil {
		fmt.Fprintln(os.Stderr, "procs:", err)
		os.Exit(2)
	}
	req.Header.Set("Content-Type", "application/json")
	if t := os.Getenv("PROCS_BEARER"); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "procs:", err)
		os.Exit(1)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "procs: %s answered %s: %s %v\n", url, resp.Status, body, err)
		os.Exit(1)
	}
	return d
}

// firstLine reads r to its end and returns how long after t0 its first
// line ended (the whole output's end when it has no newline).
func firstLine(r io.Reader, t0 time.Time) time.Duration {
	var first time.Duration
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if first == 0 && bytes.IndexByte(buf[:n], '\n') >= 0 {
			first = time.Since(t0)
		}
		if err != nil {
			if first == 0 {
				first = time.Since(t0)
			}
			return first
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
