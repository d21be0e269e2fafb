// Command aimon-gw-sandbox is the gateway's sandbox program: the tracer
// that watches a sandbox's programs (package trace) and the first process
// inside each sandbox (package launch), both run from those packages'
// inits. The gateway starts it in place of its own binary when it lies
// beside it, installed by the same user or root (package sandbox): a
// binary this small starts in a tenth of the time the gateway's does, and
// every sandboxed command starts it twice (issue 41). It has nothing to do
// on its own.
package main

import (
	"fmt"
	"os"

	_ "aimon.dev/gw/internal/exec/sandbox/launch"
	_ "aimon.dev/gw/internal/exec/sandbox/trace"
)

func main() {
	fmt.Fprintln(os.Stderr, "aimon-gw-sandbox is started by aimon-gw, which runs each sandboxed command through it; run aimon-gw instead.")
	os.Exit(2)
}
