package policy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"aimon.dev/gw/policy"
)

// The lockfile a reviewer reads: each upstream tool's digest and
// definition, servers and tools sorted, so that the same definitions are
// the same bytes.
func ExamplePins_File() {
	pins := policy.Pins{"fs": {"read_file": {
		SHA256:     "sha256:0c1e",
		Definition: []byte(`{"name":"read_file","description":"Reads a file.","inputSchema":{"type":"object"}}`),
	}}}
	src, err := pins.File()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(src[strings.Index(string(src), "package"):]))
	// Output:
	// package policy
	//
	// pins: fs: read_file: {
	// 	sha256:      "sha256:0c1e"
	// 	description: "Reads a file."
	// 	inputSchema: type: "object"
	// }
}

// A policy that holds no upstream server to pins has nothing to pin, and
// Pin starts nothing.
func ExamplePolicy_Pin() {
	pol, err := policy.LoadFS(context.Background(), team, policy.WithWorkdir("/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := pol.Pin(context.Background(), policy.PinOptions{})
	fmt.Println(len(st.Pinned), len(st.Now), err)
	// Output: 0 0 <nil>
}

// A server that cannot be started is an error naming it, and no state; a
// pin without its definition cannot be written into the lockfile (rule
// S3: a tool is pinned by what its server gave, or not at all).
func TestS3PinBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-server")
	files := fstest.MapFS{"policy.cue": {Data: []byte("package policy\n\nservers: fs: {command: [\"" + missing + "\"], expose: \"*\"}\nagent: \"allowed-tools\": [\"fs__read_file\"]\n")}}
	pol, err := policy.LoadFS(context.Background(), files, policy.WithWorkdir("/"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := pol.Pin(context.Background(), policy.PinOptions{})
	if err == nil || st != nil || !strings.HasPrefix(err.Error(), "server fs: ") {
		t.Errorf("Pin of a server that cannot start = %v, %v; want an error naming the server", st, err)
	}
	_, err = policy.Pins{"fs": {"read_file": {SHA256: "sha256:0c1e"}}}.File()
	if err == nil || !strings.Contains(err.Error(), "the pin of fs's tool read_file holds no definition") {
		t.Errorf("File of a digest-only pin: %v", err)
	}
	if got := policy.PinMembers(); got[0] != "sha256" || len(got) != 6 {
		t.Errorf("PinMembers() = %v", got)
	}
}
