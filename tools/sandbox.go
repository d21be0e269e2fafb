package tools

import "log/slog"

// Sandbox is where a command a tool runs may write and what it may see
// (rule R6), derived per call from the policy: the gateway computes it, and
// a tool that runs programs runs them inside it.
type Sandbox struct {
	// Off is set when the policy turned the sandbox off (mode "off").
	Off bool `json:"off,omitempty"`
	// Writable are the directories the command may write; "/" for all. A
	// private /tmp is always writable and not listed.
	Writable []string `json:"writable"`
	// ReadOnly stay read-only even inside a writable directory: the policy
	// directory and the gateway's and plugins' binaries.
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden are not readable at all.
	Hidden []string `json:"hidden,omitempty"`
	// Network is whether the command reaches the network.
	Network bool `json:"network"`
	// Hosts, when Network is false, are the hosts (netproxy patterns) the
	// command reaches through the gateway's proxy, and nothing else.
	Hosts []string `json:"hosts,omitempty"`
	// Log receives what the sandbox's proxy refuses; nil for slog's default.
	Log *slog.Logger `json:"-"`
	// Env names the environment variables passed through besides PATH,
	// HOME, LANG, LC_*, TERM and TMPDIR.
	Env []string `json:"env,omitempty"`
}
