package codeximport

import (
	"testing"

	"aimon.dev/gw/internal/testkit/importcase"
)

var cases = importcase.Import{Files: Files, Import: Import}

// TestP14CodexImportGolden imports each case of testdata as aimon-gw
// import codex does and compares the policy, and the rules it cannot
// keep, with the case's golden file: prefix rules of each decision with
// alternatives, host_executable paths, a forbidden rule beside an allowed
// one, the sandbox modes, MCP servers off, narrowed by enabled_tools and
// disabled_tools, and rules it must not keep as they are (a token with a
// space or a metacharacter, a network rule).
func TestP14CodexImportGolden(t *testing.T) { cases.Golden(t) }

// TestP14CodexImportBadInput: a file Codex would refuse to load is
// refused with a sentence naming the file and line, and no policy.
func TestP14CodexImportBadInput(t *testing.T) {
	cases.Refused(t, [][3]string{
		{"syntax.rules", "prefix_rule(pattern = [\"ls\"]\n", "syntax.rules:2"},
		{"decision.rules", "\nprefix_rule(pattern = [\"rm\"], decision = \"deny\")\n", `decision.rules:2: prefix_rule's decision "deny" is not one Codex knows`},
		{"match.rules", "prefix_rule(pattern = [\"git\", \"push\"], match = [\"git pull\"])\n", `match.rules:1: prefix_rule's example "git pull" does not match its pattern`},
		{"notmatch.rules", "prefix_rule(pattern = [\"git\"], not_match = [[\"git\", \"x\"]])\n", "notmatch.rules:1: prefix_rule's example"},
		{"empty.rules", "prefix_rule(pattern = [])\n", "empty.rules:1: prefix_rule's pattern is empty"},
		{"element.rules", "prefix_rule(pattern = [\"git\", 3])\n", "element.rules:1: prefix_rule's pattern element 2"},
		{"unknown.rules", "\n\nallow_everything()\n", "unknown.rules:3:1: undefined: allow_everything"},
		{"host.rules", "host_executable(name = \"git\", paths = [\"/usr/bin/hg\"])\n", `host.rules:1: host_executable path "/usr/bin/hg" must be absolute, with basename "git"`},
		{"config.toml", "approval_policy = \n", "config.toml:1"},
		{"mode.toml", "sandbox_mode = \"yolo\"\n", `sandbox_mode "yolo" is not one Codex knows`},
		{"approval.toml", "approval_policy = \"sometimes\"\n", `approval_policy "sometimes" is not one Codex knows`},
		{"server.toml", "[mcp_servers.\"a b\"]\ncommand = \"x\"\n", "the server's name cannot be named in a policy"},
		{"notes.txt", "x", "neither a Codex rules file"},
	})
}
