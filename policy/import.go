package policy

import (
	"fmt"
	"os"
	"path/filepath"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/codeximport"
	"aimon.dev/gw/internal/front/geminiimport"
	"aimon.dev/gw/internal/front/importkit"
)

// ImportRuntimes are the agent runtimes whose permissions Import reads:
// Claude Code's settings, Codex's execpolicy rules and config.toml, and
// Gemini CLI's policy files and settings.json.
var ImportRuntimes = []string{cchook.Runtime, codex, geminiCLI}

const codex, geminiCLI = "codex", "gemini-cli"

// ImportOptions say where the imported files are used.
type ImportOptions struct {
	// Project is the project the agent works in: for Codex and Gemini CLI
	// the workspace their sandbox lets a command write, against which a
	// relative writable root is read ("" for the process's working
	// directory); for Claude Code the project its "/path" rules and
	// relative additional directories are read against ("" for the
	// settings file's own: the parent of its .claude directory).
	Project string
	// Home is the user's home directory, which tells Claude Code's user
	// settings (~/.claude/settings.json) from a project's; "" for the
	// process's (os.UserHomeDir).
	Home string
}

// An Imported is a policy made from an agent runtime's permissions, as
// aimon-gw import writes it.
type Imported struct {
	// Source is the policy, a CUE file of package policy.
	Source string
	// Notes are the places where the runtime's meaning differs from the
	// policy's, one sentence each.
	Notes []string
	// Lossy are the rules the policy could not keep exactly, one sentence
	// each: each is stricter in Source than in the runtime (an allow
	// dropped or narrowed, an ask or deny widened). aimon-gw import
	// writes no policy when there is one, unless it is given --lossy.
	Lossy []string
}

// importer is one runtime's: the files an argument names, and the import.
type importer struct {
	files func(arg string) ([]string, error)
	read  func(files []string, o ImportOptions) (*importkit.Imported, error)
}

var importers = map[string]importer{
	cchook.Runtime: {func(arg string) ([]string, error) { return []string{arg}, nil }, importClaudeCode},
	codex: {codeximport.Files, func(files []string, o ImportOptions) (*importkit.Imported, error) {
		return codeximport.Import(files, o.Project)
	}},
	geminiCLI: {geminiimport.Files, func(files []string, o ImportOptions) (*importkit.Imported, error) {
		return geminiimport.Import(files, o.Project)
	}},
}

func importerOf(runtime string) (importer, error) {
	im, ok := importers[runtime]
	if !ok {
		return im, fmt.Errorf("there is no importer of the runtime %q; give one of %v", runtime, ImportRuntimes)
	}
	return im, nil
}

// ImportFiles are the files an argument of aimon-gw import RUNTIME names:
// a file as it is, and a directory (a CODEX_HOME or a project's .codex,
// ~/.gemini) as the runtime reads it. A path that cannot be read is an
// *fs.PathError. Claude Code's argument is its settings file.
func ImportFiles(runtime, arg string) ([]string, error) {
	im, err := importerOf(runtime)
	if err != nil {
		return nil, err
	}
	return im.files(arg)
}

// Import turns the runtime's files into a policy that keeps what each of
// their rules lets run without asking, and asks or refuses the rest as
// they do (ImportRuntimes names the runtimes): for Claude Code one
// settings file, for Codex *.rules files and at most one config.toml, for
// Gemini CLI *.toml policy files and at most one settings.json. A file
// that cannot be read is an *fs.PathError; one that is not what the
// runtime reads is an error that names it and says why.
func Import(runtime string, files []string, o ImportOptions) (*Imported, error) {
	im, err := importerOf(runtime)
	if err != nil {
		return nil, err
	}
	if runtime != cchook.Runtime {
		if o.Project == "" {
			o.Project, _ = os.Getwd()
		}
		if o.Project, err = filepath.Abs(o.Project); err != nil {
			return nil, fmt.Errorf("the project %s has no absolute path: %w", o.Project, err)
		}
	}
	out, err := im.read(files, o)
	if err != nil {
		return nil, err
	}
	return &Imported{Source: out.Source, Notes: out.Notes, Lossy: out.Lossy}, nil
}

// importClaudeCode reads the one settings file.
func importClaudeCode(files []string, o ImportOptions) (*importkit.Imported, error) {
	if len(files) != 1 {
		return nil, fmt.Errorf("Claude Code's permissions are read from one settings file, and %d were given; give its .claude/settings.json", len(files))
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	if o.Project == "" {
		o.Project = cchook.ProjectOf(files[0])
	}
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	return cchook.Import(data, files[0], o.Project, o.Home)
}
