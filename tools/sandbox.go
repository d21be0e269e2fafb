package tools

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
	// Env names the environment variables passed through besides PATH,
	// HOME, LANG, LC_*, TERM and TMPDIR.
	Env []string `json:"env,omitempty"`
}
