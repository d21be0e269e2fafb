package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/sandbox"
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

	mu   sync.Mutex
	used map[string]time.Time // token MAC → its expiry
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

// ReadApprovalKey reads an approval key from a file that no one but its
// owner may read or write.
func ReadApprovalKey(path string) ([]byte, error) {
	sandbox.Conceal(path) // a tool that read it could approve any call (rule P15)
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the approval key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the approval key %s may be read or written by others (mode %v); make it 0600", path, st.Mode().Perm())
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the approval key: %w", err)
	}
	if key = []byte(strings.TrimSpace(string(key))); len(key) < MinKeyBytes {
		return nil, fmt.Errorf("the approval key %s has %d bytes; give at least %d random bytes", path, len(key), MinKeyBytes)
	}
	return key, nil
}

// approvalClaims is what a token says.
type approvalClaims struct {
	Call     string   `json:"d"` // the call's digest
	Chain    []string `json:"c"`
	Revision string   `json:"r"`
	Expires  int64    `json:"e"` // Unix seconds
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

// Seal returns the token that approves the call on chain under revision.
func (a *Approvals) Seal(tool string, in tools.Input, chain []string, revision string) (string, time.Time) {
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	payload, _ := json.Marshal(approvalClaims{Call: digest(tool, in), Chain: chain, Revision: revision, Expires: exp.Unix()})
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + a.mac(p), exp
}

func (a *Approvals) mac(payload string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errNotThisCall is Open's answer for a genuine token of another call, so
// that a line's tokens can be tried on each of its calls.
var errNotThisCall = errors.New("the approval token was given for another call")

// Open checks that token approves this call, and spends it.
func (a *Approvals) Open(token, tool string, in tools.Input, chain []string, revision string) error {
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
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, exp := range a.used {
		if now.After(exp) {
			delete(a.used, k)
		}
	}
	if _, spent := a.used[sig]; spent {
		return errors.New("the approval token was already used; one approval runs one call, so ask again")
	}
	a.used[sig] = time.Unix(c.Expires, 0)
	return nil
}

// approve turns an ask into an allow when the call carries a token a person
// gave for it, and otherwise seals a new token into the decision (P15).
func (g *Gateway) approve(p prepared, d rule.Decision) rule.Decision {
	if g.opts.ClientAsks {
		return d
	}
	a := g.opts.Approvals
	if a == nil {
		d.Reason += " No person can be asked through this front end, so the call is refused."
		return d
	}
	var why error
	for _, tok := range p.approvals {
		err := a.Open(tok, p.Name, d.Input, p.chain, p.cur.Revision)
		if err == nil {
			// The allow entries, not the ask entries, are what the
			// approved call runs under (its anchors among them).
			a := p.eff.Approved(p.Name, d.Input, written(p.tool, p.input), g.opts.Workdir)
			if !a.Allowed {
				return a
			}
			d.Allowed, d.Ask, d.Rule, d.Entries = true, false, rule.P15, a.Entries
			d.Reason = fmt.Sprintf("%s is allowed: a person approved this call. (%s)", p.Name, d.Reason)
			return d
		}
		if why == nil && !errors.Is(err, errNotThisCall) {
			why = err
		}
	}
	if why != nil {
		d.Reason = fmt.Sprintf("The approval given with the call was not accepted: %s. %s", why, d.Reason)
	}
	d.Approval, _ = a.Seal(p.Name, d.Input, p.chain, p.cur.Revision)
	return d
}

// askSentence is what the line protocol answers an ask with: the reason,
// and how a person's approval is sent back.
func (g *Gateway) askSentence(d rule.Decision) string {
	return fmt.Sprintf("%s A person must approve it: to run it, send the same call again with \"approvals\": [%q] on its line within %s.", d.Reason, d.Approval, g.opts.Approvals.ttl)
}
