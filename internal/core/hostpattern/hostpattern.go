// Package netproxy is the network a sandbox gets by domain (rule R8): an
// HTTP proxy (CONNECT and plain HTTP) that connects only to the hosts and
// ports a tool's sandbox.network.allow lists, resolving names itself, and
// refusing an IP literal that is not listed and a name that resolves to a
// loopback, link-local or private address that is not listed either (DNS
// rebinding).
package hostpattern

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// A Pattern is one entry of sandbox.network.allow: a host name, *.DOMAIN
// for every name below DOMAIN (not DOMAIN itself), or an IP address, with
// an optional :PORT; without one, every port of the host.
type Pattern struct {
	Host     string     // lower case, without the "*." of a wildcard
	Wildcard bool       // *.Host
	Addr     netip.Addr // set for an IP address
	Port     int        // 0 for every port
}

// ParsePattern reads one allow entry; its error is a sentence that says
// what to write instead.
func ParsePattern(s string) (Pattern, error) {
	var p Pattern
	host, port, err := splitPort(s)
	if err != nil {
		return p, err
	}
	p.Port = port
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if a.Zone() != "" {
			return p, fmt.Errorf("%q names an address with a zone; write the address without %%%s", s, a.Zone())
		}
		p.Addr = a.Unmap()
		return p, nil
	}
	if strings.HasPrefix(host, "[") {
		return p, fmt.Errorf("%q is not an IPv6 address in brackets", s)
	}
	host = strings.ToLower(host)
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard, host = true, rest
	}
	if host == "*" || host == "" {
		return p, fmt.Errorf("%q allows every host; write network: true for the whole network, or list the hosts", s)
	}
	if err := checkName(host); err != nil {
		return p, fmt.Errorf("%q is not a host pattern: %v; write a name (api.github.com), *.DOMAIN (*.golang.org) or an IP address, each with an optional :PORT", s, err)
	}
	p.Host = host
	return p, nil
}

// splitPort splits HOST:PORT; a bare IPv6 address has no port.
func splitPort(s string) (string, int, error) {
	switch {
	case strings.Contains(s, "://"):
		return "", 0, fmt.Errorf("%q is a URL; write only its host (and :PORT)", s)
	case strings.ContainsAny(s, "/?#@ \t"):
		return "", 0, fmt.Errorf("%q is not a host pattern: a host has no path, query, user or blank; write a name, *.DOMAIN or an IP address, with an optional :PORT", s)
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
		return s, 0, nil // no port, or a bare IPv6 address
	}
	if strings.HasPrefix(s, "[") && !strings.HasSuffix(s[:i], "]") {
		return s, 0, nil // [v6] without a port
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q has the port %q, which is not a number from 1 to 65535", s, s[i+1:])
	}
	return s[:i], port, nil
}

// checkName checks a DNS name: labels of letters, digits and hyphens.
func checkName(host string) error {
	if len(host) > 253 {
		return fmt.Errorf("the name is longer than 253 characters")
	}
	for _, l := range strings.Split(host, ".") {
		switch {
		case l == "":
			return fmt.Errorf("it has an empty label")
		case len(l) > 63:
			return fmt.Errorf("the label %q is longer than 63 characters", l)
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Errorf("the label %q starts or ends with a hyphen", l)
		case strings.Contains(l, "*"):
			return fmt.Errorf("* may only be the whole first label (*.DOMAIN)")
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("the label %q holds %q", l, c)
			}
		}
	}
	return nil
}

// String is the pattern as written, normalised.
func (p Pattern) String() string {
	h := p.Host
	switch {
	case p.Addr.IsValid() && p.Addr.Is6():
		h = "[" + p.Addr.String() + "]"
	case p.Addr.IsValid():
		h = p.Addr.String()
	case p.Wildcard:
		h = "*." + h
	}
	if p.Port != 0 {
		h += ":" + strconv.Itoa(p.Port)
	}
	return h
}

// Patterns is a sandbox's allow list.
type Patterns []Pattern

// Parse reads an allow list; the first bad entry is the error.
func Parse(entries []string) (Patterns, error) {
	var ps Patterns
	for _, e := range entries {
		p, err := ParsePattern(e)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Name reports whether the host name (not an address) is listed with port.
func (ps Patterns) Name(host string, port int) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, p := range ps {
		if p.Addr.IsValid() || p.Port != 0 && p.Port != port {
			continue
		}
		if host == p.Host && !p.Wildcard || p.Wildcard && strings.HasSuffix(host, "."+p.Host) {
			return true
		}
	}
	return false
}

// Addr reports whether the address is listed with port.
func (ps Patterns) Addr(a netip.Addr, port int) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Addr.IsValid() && p.Addr == a && (p.Port == 0 || p.Port == port) {
			return true
		}
	}
	return false
}

// Internal reports whether a is an address a public name has no business
// resolving to: loopback, link-local, private, shared (100.64/10),
// unspecified or multicast.
func Internal(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsPrivate() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() || shared.Contains(a)
}

var shared = netip.MustParsePrefix("100.64.0.0/10")
