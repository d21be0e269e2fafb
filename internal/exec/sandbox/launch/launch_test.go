package launch

import (
	"slices"
	"strings"
	"testing"
)

// TestR8ProxyEnv: the command sees every proxy variable naming the
// sandbox's port, whatever the gateway's environment said, and no
// NO_PROXY that would send a host around the proxy.
func TestR8ProxyEnv(t *testing.T) {
	tests := []struct {
		note string
		env  []string
		gone string
	}{
		{note: "an empty environment", env: nil},
		{note: "a proxy of the gateway's", env: []string{"HTTPS_PROXY=http://corp:3128", "PATH=/bin"}, gone: "http://corp:3128"},
		{note: "NO_PROXY in either case", env: []string{"NO_PROXY=*", "no_proxy=*"}, gone: "NO_PROXY"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			got := ProxyEnv(tc.env, "http://127.0.0.1:9")
			for _, v := range proxyVars {
				if !slices.Contains(got, v+"=http://127.0.0.1:9") {
					t.Errorf("%s is not the sandbox's proxy: %q", v, got)
				}
			}
			for _, kv := range got {
				if tc.gone != "" && strings.Contains(strings.ToUpper(kv), strings.ToUpper(tc.gone)) {
					t.Errorf("%q stayed: %q", tc.gone, got)
				}
			}
			if len(got) != len(proxyVars)+len(slices.DeleteFunc(slices.Clone(tc.env), func(kv string) bool { return !strings.HasPrefix(kv, "PATH=") })) {
				t.Errorf("other variables were lost or added: %q", got)
			}
		})
	}
}
