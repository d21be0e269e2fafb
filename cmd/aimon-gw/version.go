package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// Set at build time when the build records no VCS stamp (GOFLAGS has
// -buildvcs=false, or the source is not a git checkout):
//
//	go install -ldflags "-X main.revision=$(git rev-parse HEAD) -X main.moduleVersion=v0.4.0" ./cmd/aimon-gw
var (
	moduleVersion string
	revision      string
)

func versionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the module version and VCS revision this binary was built from",
		Action: func(*cli.Context) error {
			fmt.Fprintln(stdout, "aimon-gw", version())
			return nil
		},
	}
}

// version is the module version and the VCS revision (with +dirty for
// uncommitted changes) from the build info, or else from -ldflags -X.
func version() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info, moduleVersion, revision)
}

func versionOf(info *debug.BuildInfo, modVersion, rev string) string {
	v := ""
	var stamped, dirty string
	if info != nil {
		v = info.Main.Version
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				stamped = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
	}
	if (v == "" || v == "(devel)") && modVersion != "" {
		v = modVersion
	}
	if v == "" {
		v = "(devel)"
	}
	switch {
	case stamped != "":
		return v + " " + stamped + dirty
	case rev != "":
		return v + " " + rev
	}
	return v + " (no VCS revision recorded: build in a git checkout without -buildvcs=false, or with -ldflags \"-X main.revision=…\")"
}
