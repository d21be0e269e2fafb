package hostpattern

import (
	"net/netip"
	"strings"
	"testing"
)

// TestR8HostPatterns: a host matches by name (Name) or, when it is an
// address, by address (Addr); an address never matches as a name.
func TestR8HostPatterns(t *testing.T) {
	tests := []struct {
		note, pattern, host string
		port                int
		want                bool
	}{
		{note: "a name, any port", pattern: "api.github.com", host: "api.github.com", port: 8443, want: true},
		{note: "a name, case and a final dot", pattern: "API.GitHub.com", host: "api.github.COM.", port: 443, want: true},
		{note: "another name", pattern: "api.github.com", host: "github.com", port: 443},
		{note: "a name that ends like it", pattern: "github.com", host: "evilgithub.com", port: 443},
		{note: "a name with its port", pattern: "github.com:443", host: "github.com", port: 443, want: true},
		{note: "a name at another port", pattern: "github.com:443", host: "github.com", port: 80},
		{note: "a wildcard, one level", pattern: "*.golang.org", host: "proxy.golang.org", port: 443, want: true},
		{note: "a wildcard, two levels", pattern: "*.golang.org", host: "a.b.golang.org", port: 443, want: true},
		{note: "a wildcard, the domain itself", pattern: "*.golang.org", host: "golang.org", port: 443},
		{note: "a wildcard, a name that ends like it", pattern: "*.golang.org", host: "evilgolang.org", port: 443},
		{note: "a wildcard with a port", pattern: "*.example.com:443", host: "a.example.com", port: 80},
		{note: "v4, any port", pattern: "10.1.2.3", host: "10.1.2.3", port: 22, want: true},
		{note: "v4 with a port", pattern: "10.1.2.3:443", host: "10.1.2.3", port: 80},
		{note: "v4 mapped into v6", pattern: "10.1.2.3", host: "::ffff:10.1.2.3", port: 80, want: true},
		{note: "v6 in brackets with a port", pattern: "[::1]:8080", host: "::1", port: 8080, want: true},
		{note: "v6 bare", pattern: "fd00::1", host: "fd00::1", port: 1, want: true},
		{note: "another address", pattern: "10.1.2.3", host: "10.1.2.4", port: 22},
		{note: "a name that looks like an address", pattern: "10.1.2.3.example.com", host: "10.1.2.3", port: 22},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			p, err := ParsePattern(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			ps := Patterns{p}
			got := ps.Name(tc.host, tc.port)
			if a, err := netip.ParseAddr(tc.host); err == nil {
				if got {
					t.Errorf("the address %s matches %s as a name", tc.host, tc.pattern)
				}
				got = ps.Addr(a, tc.port)
			}
			if got != tc.want {
				t.Errorf("%s matches %s:%d = %v, want %v", tc.pattern, tc.host, tc.port, got, tc.want)
			}
		})
	}
}

func TestR8HostPatternsBadInput(t *testing.T) {
	tests := []struct{ note, pattern, want string }{
		{note: "empty", pattern: "", want: "allows every host"},
		{note: "every host", pattern: "*", want: "allows every host"},
		{note: "every host at a port", pattern: "*:443", want: "allows every host"},
		{note: "a URL", pattern: "https://github.com", want: "is a URL"},
		{note: "a path", pattern: "github.com/x", want: "has no path"},
		{note: "a user", pattern: "me@github.com", want: "no path, query, user"},
		{note: "a blank", pattern: "git hub.com", want: "blank"},
		{note: "a port of zero", pattern: "github.com:0", want: "from 1 to 65535"},
		{note: "a port that is no number", pattern: "github.com:https", want: "from 1 to 65535"},
		{note: "a wildcard label inside", pattern: "api.*.com", want: "whole first label"},
		{note: "a partial wildcard", pattern: "*github.com", want: "whole first label"},
		{note: "an empty label", pattern: "github..com", want: "empty label"},
		{note: "a hyphen at the end", pattern: "github-.com", want: "hyphen"},
		{note: "a label too long", pattern: strings.Repeat("a", 64) + ".com", want: "longer than 63"},
		{note: "a character", pattern: "git!hub.com", want: "holds"},
		{note: "a zone", pattern: "fe80::1%eth0", want: "zone"},
		{note: "brackets without v6", pattern: "[github.com]:443", want: "not an IPv6 address"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			_, err := ParsePattern(tc.pattern)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParsePattern(%q) = %v, want an error with %q", tc.pattern, err, tc.want)
			}
		})
	}
}
