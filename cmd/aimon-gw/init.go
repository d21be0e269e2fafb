package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/policy"
)

type initParams struct {
	Dir, Module string
	Stdout      io.Writer
}

func initCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "start a policy repository: a CUE module, a policy, a test file and the schema vendored for stock CUE tools",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "module", Value: "example.com/policy@v0", Usage: "the CUE module path"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one directory: aimon-gw init DIR")
			}
			return initPolicy(initParams{Dir: c.Args().First(), Module: c.String("module"), Stdout: stdout})
		},
	}
}

const initPolicyCUE = `// The tools this gateway offers and who may use them. Check it with
// aimon-gw vet ., prove it with aimon-gw test ., serve it with
// aimon-gw serve --policy .
package policy

import "aimon.dev/gw/schema"

tools: {
	Read: schema.#Read
	Grep: schema.#Grep
	Glob: schema.#Glob
	Echo: schema.#Echo
}

// "./" patterns resolve against the gateway's working directory.
agent: "allowed-tools": ["Read(./**)", "Grep(./**)", "Glob(./**)", "Echo"]

validation: "enforce"
`

const initTestsCUE = `package policy

// What this policy must do: aimon-gw test .
tests: {
	"the agent reads under the working directory": {
		tool: "Read", input: file_path: "README.md"
		allowed: true, rule: "P4"
	}
	"the agent reads nothing above it": {
		tool: "Read", input: file_path: "../secret"
		allowed: false, rule: "P4"
	}
}
`

// initPolicy writes a new policy repository; it refuses to overwrite one.
func initPolicy(p initParams) error {
	if _, err := os.Stat(filepath.Join(p.Dir, "cue.mod")); err == nil {
		return fail(exitUsage, "%s already holds a CUE module (cue.mod); init writes new repositories only", p.Dir)
	}
	files := map[string]string{
		"cue.mod/module.cue": fmt.Sprintf("module: %q\nlanguage: version: \"v0.12.0\"\n", p.Module),
		"policy.cue":         initPolicyCUE,
		"tests.cue":          initTestsCUE,
	}
	for _, name := range slices.Sorted(maps.Keys(files)) { // the same file fails first every time
		if err := writeNew(filepath.Join(p.Dir, name), []byte(files[name])); err != nil {
			return fail(exitUsage, "%s; give init a new directory, or one it can write", pathProblem(err))
		}
	}
	if err := policy.VendorSchema(filepath.Join(p.Dir, "cue.mod", "pkg")); err != nil {
		return fail(exitUsage, "%v", err)
	}
	fmt.Fprintf(p.Stdout, "aimon-gw init: wrote a policy repository in %s; check it with aimon-gw vet %s and aimon-gw test %s.\n", p.Dir, p.Dir, p.Dir)
	return nil
}

func writeNew(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		pe.Op = "create" // a write, for pathProblem
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
