package main

import (
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// completionCommand prints a shell's completion script. The scripts ask
// the binary itself for the words (cli's --generate-bash-completion), so
// they follow the commands and flags of the binary that answers.
func completionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "bash: source <(aimon-gw completion bash)\n" +
			"zsh:  source <(aimon-gw completion zsh)   (after compinit)\n" +
			"fish: aimon-gw completion fish > ~/.config/fish/completions/aimon-gw.fish",
		Action: func(c *cli.Context) error {
			script := map[string]string{"bash": bashCompletion, "zsh": zshCompletion}[c.Args().First()]
			switch {
			case c.NArg() != 1:
			case c.Args().First() == "fish":
				fish, err := c.App.ToFishCompletion()
				if err != nil {
					return fail(exitUsage, "cannot write the fish script: %v", err)
				}
				_, err = io.WriteString(stdout, fish)
				return err
			case script != "":
				_, err := io.WriteString(stdout, strings.ReplaceAll(script, "$PROG", c.App.Name))
				return err
			}
			if c.NArg() == 1 {
				return fail(exitUsage, "there is no script for the shell %q; give bash, zsh or fish", c.Args().First())
			}
			return fail(exitUsage, "name one shell: aimon-gw completion bash, zsh or fish")
		},
	}
}

// manCommand prints the manual page, made from the same command
// definitions as --help.
func manCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "man",
		Usage:       "print the manual page (roff), made from the same definitions as --help",
		Description: "aimon-gw man > aimon-gw.1 && man ./aimon-gw.1",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "%q is an argument, and man takes none: aimon-gw man > aimon-gw.1", c.Args().First())
			}
			page, err := c.App.ToManWithSection(1) // a user command
			if err != nil {
				return fail(exitUsage, "cannot write the page: %v", err)
			}
			_, err = io.WriteString(stdout, page)
			return err
		},
	}
}

// The scripts are urfave/cli v2's autocomplete/bash_autocomplete and
// zsh_autocomplete (MIT licence), with the program's name put in.
const bashCompletion = `# bash completion for $PROG: source <($PROG completion bash)
_$PROG_init_completion() {
  COMPREPLY=()
  _get_comp_words_by_ref "$@" cur prev words cword
}

_$PROG_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base words
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    else
      _$PROG_init_completion -n "=:" || return
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}

complete -o bashdefault -o default -o nospace -F _$PROG_bash_autocomplete $PROG
`

const zshCompletion = `#compdef $PROG
# zsh completion for $PROG: source <($PROG completion zsh), after compinit

_$PROG_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _$PROG_zsh_autocomplete $PROG
`
