// Command procs times whole processes: each named command runs -n times,
// interleaved round by round, with a file on standard input (-in, or its
// own after <), and procs prints each one's median and its ratio to the
// first, and the medians of its processor time and its peak resident
// memory (bench/hook.sh, bench/scale.sh).
//
//	procs -n 50 -in input.json 'floor=./floor' 'hook=./aimon-gw hook claude-code' 'check<call.json=./aimon-gw check -'
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
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
			x := exec.Command(c.argv[0], c.argv[1:]...)
			x.Stdin = bytes.NewReader(c.input)
			x.Stdout, x.Stderr = io.Discard, os.Stderr
			t0 := time.Now()
			err := x.Run()
			d := time.Since(t0)
			if err != nil && x.ProcessState.ExitCode() != 1 { // 1: a finding, such as a denial
				fmt.Fprintf(os.Stderr, "procs: %s: %v\n", c.name, err)
				os.Exit(1)
			}
			if r >= 2 { // two warm-up rounds
				c.runs = append(c.runs, d)
				if ru, ok := x.ProcessState.SysUsage().(*syscall.Rusage); ok {
					c.rss = append(c.rss, time.Duration(ru.Maxrss))
				}
				c.cpu = append(c.cpu, x.ProcessState.UserTime()+x.ProcessState.SystemTime())
			}
		}
	}
	base := median(cmds[0].runs)
	for _, c := range cmds {
		m := median(c.runs)
		rss := fmt.Sprintf("   cpu %8.2f ms", float64(median(c.cpu))/1e6)
		if len(c.rss) > 0 {
			rss += fmt.Sprintf("   peak RSS %6.1f MiB", float64(median(c.rss))/1024)
		}
		fmt.Printf("%-10s median %8.2f ms   %6.2f× %s%s\n", c.name, float64(m)/1e6, float64(m)/float64(base), cmds[0].name, rss)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
