package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/tools"
)

// TestP15ApprovalTokens: a token approves the one call it was sealed for,
// on its chain, under its policy revision, once, before it expires; a
// forged, altered, expired, replayed or misdirected token is refused with
// a sentence.
func TestP15ApprovalTokens(t *testing.T) {
	key := []byte(strings.Repeat("k", MinKeyBytes))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	newA := func() *Approvals {
		a, err := NewApprovals(key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		a.now = func() time.Time { return now }
		return a
	}
	in := tools.Input{"command": "git push origin main"}
	chain := []string{"agent"}
	other, _ := NewApprovals([]byte(strings.Repeat("o", MinKeyBytes)), time.Minute)
	for _, tc := range []struct {
		note  string
		token func(a *Approvals) string
		open  func(a *Approvals, tok string) error
		says  string // "" for accepted
	}{
		{note: "the call it was sealed for", says: ""},
		{note: "another input", open: func(a *Approvals, tok string) error {
			return a.Open(tok, "Bash", tools.Input{"command": "git push --force"}, chain, "r1", "/w")
		}, says: "another call"},
		{note: "another tool", open: func(a *Approvals, tok string) error { return a.Open(tok, "Write", in, chain, "r1", "/w") }, says: "another call"},
		{note: "another chain", open: func(a *Approvals, tok string) error {
			return a.Open(tok, "Bash", in, []string{"agent", "subagent:x"}, "r1", "/w")
		}, says: "another surface chain"},
		{note: "another revision", open: func(a *Approvals, tok string) error { return a.Open(tok, "Bash", in, chain, "r2", "/w") }, says: "another revision"},
		{note: "expired", open: func(a *Approvals, tok string) error {
			a.now = func() time.Time { return now.Add(2 * time.Minute) }
			return a.Open(tok, "Bash", in, chain, "r1", "/w")
		}, says: "expired"},
		{note: "replayed", open: func(a *Approvals, tok string) error {
			if err := a.Open(tok, "Bash", in, chain, "r1", "/w"); err != nil {
				return err
			}
			return a.Open(tok, "Bash", in, chain, "r1", "/w")
		}, says: "already used"},
		{note: "forged with another key", token: func(*Approvals) string {
			tok, _ := other.Seal("Bash", in, chain, "r1", "/w")
			return tok
		}, says: "not one this gateway sealed"},
		{note: "payload altered", token: func(a *Approvals) string {
			tok, _ := a.Seal("Bash", in, chain, "r1", "/w")
			p, sig, _ := strings.Cut(tok, ".")
			return p + "x." + sig
		}, says: "not one this gateway sealed"},
		{note: "another working directory", open: func(a *Approvals, tok string) error { return a.Open(tok, "Bash", in, chain, "r1", "/w2") }, says: "another working directory"},
		{note: "spent in another store", open: func(a *Approvals, tok string) error {
			b := newA() // the same key, its own memory
			return b.Open(tok, "Bash", in, chain, "r1", "/w")
		}, says: "another state store"},
		{note: "not a token", token: func(*Approvals) string { return "yes" }, says: "not one this gateway sealed"},
		{note: "empty", token: func(*Approvals) string { return "" }, says: "not one this gateway sealed"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			a := newA()
			tok, _ := a.Seal("Bash", in, chain, "r1", "/w")
			if tc.token != nil {
				tok = tc.token(a)
			}
			open := tc.open
			if open == nil {
				open = func(a *Approvals, tok string) error { return a.Open(tok, "Bash", in, chain, "r1", "/w") }
			}
			err := open(a, tok)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.says)
			}
		})
	}
	if _, err := NewApprovals([]byte("short"), 0); err == nil {
		t.Error("a short key was accepted")
	}
}

// TestR8ApprovalKeyGroupReadIsTheGatewaysGroupOnly: a key readable by its
// group is accepted only when that group is the gateway's own (a
// Kubernetes Secret mounted with fsGroup), never when it is another's, nor
// when the group may write it.
func TestR8ApprovalKeyGroupReadIsTheGatewaysGroupOnly(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte(strings.Repeat("k", MinKeyBytes)), 0o600)
	os.Chmod(key, 0o640)
	if _, err := ReadApprovalKey(key); err != nil {
		t.Errorf("a key of mode 0640 in the gateway's own group: %v", err)
	}
	os.Chmod(key, 0o660)
	if _, err := ReadApprovalKey(key); err == nil || !strings.Contains(err.Error(), "may be read or written by others") {
		t.Errorf("a key its group may write: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	os.Chmod(key, 0o640)
	if err := os.Chown(key, 0, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadApprovalKey(key); err == nil || !strings.Contains(err.Error(), "may be read or written by others") {
		t.Errorf("a key readable by another group: %v", err)
	}
}

// TestP15ApprovalIsBoundToTheDirectoryNotItsSpelling: a token sealed in a
// working directory named by a link is refused once the link leads
// elsewhere, and still opens while it leads where it did (rule P15;
// hostile re-probe Q5: an approved git init ran in the link's new place).
func TestP15ApprovalIsBoundToTheDirectoryNotItsSpelling(t *testing.T) {
	root := t.TempDir()
	a, b, link := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "current")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	ap, err := NewApprovals(nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	in := tools.Input{"command": "git init rr"}
	tok, _ := ap.Seal("Bash", in, []string{"agent"}, "r1", link)
	other, _ := ap.Seal("Bash", in, []string{"agent"}, "r1", link)
	if err := ap.Open(tok, "Bash", in, []string{"agent"}, "r1", a); err != nil {
		t.Errorf("a token sealed under a link to a, opened in a: %v", err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	if err := ap.Open(other, "Bash", in, []string{"agent"}, "r1", link); err == nil || !strings.Contains(err.Error(), "another working directory") {
		t.Errorf("a token sealed under the link, opened once it leads to b: %v", err)
	}
}
