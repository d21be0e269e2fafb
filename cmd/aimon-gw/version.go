package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/urfave/cli/v2"
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

// version is the module version and, when the build recorded it, the VCS
// revision (with +dirty for uncommitted changes), from the build info.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return v
}
