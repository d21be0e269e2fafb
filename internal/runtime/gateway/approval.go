package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/tools"
)

// Approvals seals an ask decision into a token that a harness sends back
// with the same call once a person has approved it (rule P15). The token
// is an HMAC over the call's digest, its chain, the policy revision and an
// expiry, so no pending ask is held between the two lines; only the tokens
// already used are remembered, until they expire, so that one approval
// runs one call.
type Approvals struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	// store, when set, is where tokens are spent, shared with every
	// process that holds the key (rule R10); otherwise this process's
	// memory, which a second process or a restart does not share.
	store state.Store

	mu   sync.Mutex
	used map[string]time.Time // token MAC → its expiry

	// where is the identity of the store tokens are spent in, sealed
	// into each token: one is honoured only by a gateway that spends it
	// where it was sealed to be spent (rules P15, R10). This process's
	// own for its memory; the store's, once read, for a store.
	whereMu sync.Mutex
	where   string
}

// SpendIn makes a spend of a token a spend in s, shared by every process
// that uses s (rule R10). It reads the store's identity now, within a
// bound, so that sealing an ask later asks the store nothing; a store
// that does not answer yet is asked again at the first token.
func (a *Approvals) SpendIn(s state.Store) {
	a.store, a.where = s, ""
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.storeWhere(ctx)
}

// storeIDKey is the record that names a state store to the tokens spent
// in it: a random id the first gateway to use the store creates.
const storeIDKey = "approval-store-id"

// storeWhere is the identity of the store tokens are spent in (rule
// R10): this process's id for its memory, else the record the store
// keeps, made by the first gateway that needed it; "" while the store
// cannot say.
func (a *Approvals) storeWhere(ctx context.Context) string {
	a.whereMu.Lock()
	defer a.whereMu.Unlock()
	if a.where != "" {
		return a.where
	}
	recs := state.RecordsOf(a.store)
	if a.store == nil || recs == nil {
		a.where = randomID()
		return a.where
	}
	id, ok, err := recs.Get(ctx, storeIDKey)
	if err == nil && !ok {
		// The first of two racing gateways wins; both read its id.
		if _, err = recs.Create(ctx, storeIDKey, []byte(randomID()), time.Now().AddDate(100, 0, 0)); err == nil {
			id, ok, err = recs.Get(ctx, storeIDKey)
		}
	}
	if err != nil || !ok {
		return ""
	}
	a.where = string(id)
	return a.where
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Ping reports whether tokens can be spent now.
func (a *Approvals) Ping(ctx context.Context) error {
	if a.store == nil {
		return nil
	}
	return a.store.Ping(ctx)
}

// Store is where tokens are spent; nil when it is this process's memory.
func (a *Approvals) Store() state.Store { return a.store }

// Derive is a key of its own for label, derived from the approval key:
// what another part of the gateway seals (the approval page's forms)
// every process that shares the key opens, without holding the key.
func (a *Approvals) Derive(label string) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("aimon-gw derived key\x00" + label))
	return m.Sum(nil)
}

// MinKeyBytes is the shortest approval key accepted.
const MinKeyBytes = 32

// NewApprovals returns approvals sealed with key (at least MinKeyBytes),
// valid for ttl; a nil key is a random one, good for this process only.
func NewApprovals(key []byte, ttl time.Duration) (*Approvals, error) {
	if key == nil {
		key = make([]byte, MinKeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("the approval key has %d bytes; give at least %d random bytes", len(key), MinKeyBytes)
	}
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	return &Approvals{key: key, ttl: ttl, now: time.Now, used: map[string]time.Time{}}, nil
}

// ReadApprovalKey reads an approval key from a file that is its owner's
// alone (ReadKey), and conceals it from every tool.
func ReadApprovalKey(path string) ([]byte, error) {
	sandbox.Conceal(path) // a tool that read it could approve any call (rule P15)
	return ReadKey(path, "the approval key")
}

// ReadKey reads the key what names ("the approval key") from a file that
// is its owner's alone: owned by the user the gateway runs as (or root),
// with no other name (a hard link made beforehand would let a tool read it
// under that name) and a mode open to no one else (rules P15, R8). What is
// checked is the file opened, not the name. The caller conceals it.
func ReadKey(path, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s %s is not a regular file", what, path)
	case fi.Mode().Perm()&0o037 != 0 || fi.Mode().Perm()&0o040 != 0 && (st == nil || int(st.Gid) != os.Getegid()):
		// Read by the gateway's own group is what a Kubernetes Secret
		// mounted with fsGroup gives (0440, root:fsGroup).
		return nil, fmt.Errorf("%s %s may be read or written by others (mode %v); make it 0600 (0440 or 0640 only when its group is the gateway's own)", what, path, fi.Mode().Perm())
	case st != nil && st.Nlink != 1:
		return nil, fmt.Errorf("%s %s has %d names (hard links), and a tool could read it under another; give the gateway a key file of its own (copy it, then remove the other names)", what, path, st.Nlink)
	case st != nil && int(st.Uid) != os.Geteuid() && st.Uid != 0:
		// root owns what a Kubernetes Secret mounts, and can read any file anyway.
		return nil, fmt.Errorf("%s %s is owned by uid %d, not by the gateway's user (uid %d) or root, so that user can replace it; chown it to the gateway's user", what, path, st.Uid, os.Geteuid())
	}
	key, err := io.ReadAll(io.LimitReader(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, err)
	}
	if key = []byte(strings.TrimSpace(string(key))); len(key) < MinKeyBytes {
		return nil, fmt.Errorf("%s %s has %d bytes; give at least %d random bytes", what, path, len(key), MinKeyBytes)
	}
	return key, nil
}

// approvalClaims is what a token says.
type approvalClaims struct {
	Call     string   `json:"d"` // the call's digest
	Chain    []string `json:"c"`
	Revision string   `json:"r"`
	// Workdir is the digest of the working directory the call was
	// decided in: its command and relative paths mean what they mean
	// there (rule P15).
	Workdir string `json:"w"`
	// Store is the identity of the store the token is spent in (rule
	// R10): only a gateway that spends it there honours it.
	Store   string `json:"s"`
	Expires int64  `json:"e"` // Unix seconds
	// Nonce makes each approval one of its own: two asks of one call in
	// the same second are two approvals, each spent once.
	Nonce string `json:"n,omitempty"`
}

// digest is the call as decided: its tool and canonical input.
func digest(tool string, in tools.Input) string {
	b, _ := json.Marshal(in) // maps marshal with sorted keys
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(b)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// workdirDigest is how a token names a working directory: the directory
// itself, where its links lead and its device and inode, not its
// spelling, so that a token approved under a link runs nowhere else once
// the link is moved (rule P15; hostile re-probe Q5).
func workdirDigest(wd string) string {
	id := filepath.Clean(wd)
	if real, err := filepath.EvalSymlinks(id); err == nil {
		id = real
		if fi, err := os.Stat(real); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				id = fmt.Sprintf("%s\x00%d:%d", real, st.Dev, st.Ino)
			}
		}
	}
	h := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(h[:16])
}

// Seal returns the token that approves the call on chain under revision
// in the working directory workdir.
func (a *Approvals) Seal(tool string, in tools.Input, chain []string, revision, workdir string) (string, time.Time) {
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	nonce := make([]byte, 12)
	rand.Read(nonce)
	payload, _ := json.Marshal(approvalClaims{Call: digest(tool, in), Chain: chain, Revision: revision, Workdir: workdirDigest(workdir), Store: a.storeWhere(context.Background()), Expires: exp.Unix(), Nonce: base64.RawURLEncoding.EncodeToString(nonce)})
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + a.mac(p), exp
}

func (a *Approvals) mac(payload string) string { return mac(a.key, payload) }

// mac is the HMAC-SHA256 of payload under key, as a token spells it.
func mac(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errNotThisCall is Open's answer for a genuine token of another call,
// looked past, as a batch's tokens are each for one of its calls.
var errNotThisCall = decide.ErrNotThisCall

var errSpent = errors.New("the approval token was already used; one approval runs one call, so ask again")

// Open checks that token approves this call, and spends it.
func (a *Approvals) Open(token, tool string, in tools.Input, chain []string, revision, workdir string) error {
	p, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(a.mac(p))) {
		return errors.New("the approval token is not one this gateway sealed (it was altered, or sealed with another key)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	var c approvalClaims
	if err != nil || json.Unmarshal(raw, &c) != nil {
		return errors.New("the approval token cannot be read")
	}
	now := a.now()
	switch {
	case now.Unix() >= c.Expires:
		return fmt.Errorf("the approval token expired at %s; ask again", time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
	case c.Revision != revision:
		return errors.New("the approval token was given under another revision of the policy; ask again")
	case strings.Join(c.Chain, "\x00") != strings.Join(chain, "\x00"):
		return errors.New("the approval token was given for another surface chain")
	case c.Call != digest(tool, in):
		return errNotThisCall
	case c.Workdir != workdirDigest(workdir):
		return errors.New("the approval token was given for this call in another working directory (--workdir), where its command and paths mean something else; ask again here")
	}
	switch where := a.storeWhere(context.Background()); {
	case where == "":
		return fmt.Errorf("%s cannot say which store it is, so the token cannot be checked as spent there and the call does not run; try again once the state store answers", a.store)
	case c.Store != where:
		return errors.New("the approval token was given by a gateway that spends approvals in another state store (--state), and it is honoured only where it is spent, once; ask again here, or give this gateway the same --state")
	}
	if a.store != nil {
		first, err := a.store.Spend(context.Background(), sig, time.Unix(c.Expires, 0))
		switch {
		case err != nil:
			return fmt.Errorf("it cannot be recorded as spent, so the call does not run (%v); try again once the state store is back", err)
		case !first:
			return errSpent
		}
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, exp := range a.used {
		if now.After(exp) {
			delete(a.used, k)
		}
	}
	if _, spent := a.used[sig]; spent {
		return errSpent
	}
	a.used[sig] = time.Unix(c.Expires, 0)
	return nil
}

// askSentence is what the line protocol answers an ask with: the reason,
// and how a person's approval is sent back.
func (g *Gateway) askSentence(d rule.Decision) string {
	return fmt.Sprintf("%s A person must approve it: to run it, send the same call again with \"approvals\": [%q] on its line within %s.", d.Reason, d.Approval, g.opts.Approvals.ttl)
}
