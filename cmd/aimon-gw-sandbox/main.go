// Command aimon-gw-sandbox is the gateway's sandbox program: the first
// process inside each sandbox (package launch), run from that package's
// init; asked with trace.SourcesArg, it says what it was built from.
// The gateway starts it in place of its own binary when it lies
// beside it, installed by the same user or root (package sandbox): a
// binary this small starts in a tenth of the time the gateway's does, and
// every sandboxed command starts it (issue 41). It has nothing to do on
// its own.
package main

import (
	"fmt"
	"os"

	"aimon.dev/gw/internal/exec/sandbox/launch"
	"aimon.dev/gw/internal/exec/sandbox/trace"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == trace.SourcesArg {
		// The gateway asks, once, whether this is its own build's.
		fmt.Println(trace.Digest(trace.Sources, launch.Sources))
		return
	}
	fmt.Fprintln(os.Stderr, "aimon-gw-sandbox is started by aimon-gw, which runs each sandboxed command through it; run aimon-gw instead.")
	os.Exit(2)
}
