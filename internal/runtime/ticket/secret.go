package ticket

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// A store URL with a password (redis://:PASS@host) must not stand in the
// command the hook hands the runtime: the runtime shows it, logs it and
// gives it to the model, and every process can read it in /proc. So the
// line carries the URL with its password masked and a reference to the
// whole URL, which the hook keeps in the state directory (hidden from
// every sandbox and file tool, rule R8), and exec reads it back there.

const secretRef = "aimon-gw-secret="

// Mask returns spec as it may be shown: spec itself when it has no
// password, else the URL with its password masked and a reference to the
// whole URL, which Mask keeps in the state directory dir.
func Mask(dir, spec string) (string, error) {
	u, err := url.Parse(spec)
	if err != nil || u.User == nil {
		return spec, nil
	}
	if _, ok := u.User.Password(); !ok {
		return spec, nil
	}
	sum := sha256.Sum256([]byte(spec))
	ref := hex.EncodeToString(sum[:12])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the state directory %s cannot be made, so the store's password would stand in the command: %v", dir, err)
	}
	if err := OwnDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "state-"+ref)
	if b, err := os.ReadFile(path); err != nil || string(b) != spec {
		f, err := os.CreateTemp(dir, ".state-*") // 0600
		if err != nil {
			return "", fmt.Errorf("the store's URL cannot be kept in %s, so its password would stand in the command: %v", dir, err)
		}
		_, err = f.WriteString(spec)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
			return "", fmt.Errorf("the store's URL cannot be kept in %s, so its password would stand in the command: %v", dir, err)
		}
	}
	return redacted(u) + "#" + secretRef + ref, nil
}

// redacted is u with its password masked and no fragment.
func redacted(u *url.URL) string {
	shown := *u
	shown.Fragment, shown.RawFragment = "", ""
	return shown.Redacted()
}

// Unmask returns the whole URL a masked one (Mask) refers to, from the
// state directory dir; spec itself when it is not masked.
func Unmask(dir, spec string) (string, error) {
	base, frag, ok := strings.Cut(spec, "#"+secretRef)
	if !ok {
		return spec, nil
	}
	if len(frag) != 24 || strings.Trim(frag, "0123456789abcdef") != "" {
		return "", fmt.Errorf("--state %q refers to no URL the hook kept: its reference is not %d hexadecimal digits (the hook sets it)", spec, 24)
	}
	if err := OwnDir(dir); err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "state-"+frag))
	if err != nil {
		return "", fmt.Errorf("the store's URL the hook kept for --state %q cannot be read: %v; run the command again, and the hook keeps it anew", base, err)
	}
	whole := string(b)
	sum := sha256.Sum256(b)
	u, err := url.Parse(whole)
	if err != nil || hex.EncodeToString(sum[:12]) != frag || redacted(u) != base {
		return "", fmt.Errorf("the store's URL the hook kept for --state %q is not the one it names; run the command again, and the hook keeps it anew", base)
	}
	return whole, nil
}
