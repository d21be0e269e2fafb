package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/runtime/state"
)

// SessionMeta is the _meta key under which an HTTP caller's sealed session
// handle travels (rule P18): each result carries it, and the client sends
// it back in the _meta of its next tools/call, so that any replica that
// shares the gateway's key and state store continues the session.
const SessionMeta = "aimon.dev/session"

// sealedHandle is what a handle says: a digest of the principal it was
// sealed for, the session's own random name, and when it was sealed.
type sealedHandle struct {
	Principal string `json:"p"`
	Nonce     string `json:"n"`
	Issued    int64  `json:"i"`
}

// sealedSessions seal and open handles with a key derived from the
// approval key, which every replica of a fleet holds; the sessions' labels
// live in the fleet's state store.
type sealedSessions struct {
	once  sync.Once
	key   []byte
	store state.Sessions
}

func (g *Gateway) sealed() *sealedSessions {
	g.seal.once.Do(func() {
		if a := g.opts.Approvals; a != nil {
			g.seal.key, g.seal.store = a.Derive("sealed sessions"), SessionsIn(a)
		}
	})
	return &g.seal
}

// OpenSession is the session of a caller of a gateway that callers share
// (MCP over HTTP, rule P18), for its Call.Session: handle is the one an
// earlier result gave the caller, "" to begin a session, and the handle to
// send back is returned with it. A handle this gateway's key did not seal
// (altered, forged, of another fleet), one sealed for another principal,
// or one older than SessionTTL is refused with a sentence. Nil and "" when
// the policy in force labels no session, when the gateway has a session
// of its own (stdio), or has no key to seal with.
func (g *Gateway) OpenSession(principal, handle string) (Session, string, error) {
	cur := g.enter()
	defer cur.Exit()
	s := g.sealed()
	if cur.Session == nil || g.opts.Session != nil || s.key == nil {
		return nil, "", nil
	}
	who := sessionDigest(principal)
	if handle == "" {
		nonce := make([]byte, 16)
		rand.Read(nonce)
		h := sealedHandle{Principal: who, Nonce: base64.RawURLEncoding.EncodeToString(nonce), Issued: time.Now().Unix()}
		raw, _ := json.Marshal(h)
		p := base64.RawURLEncoding.EncodeToString(raw)
		handle = p + "." + mac(s.key, p)
		return StoredSession(s.store, "mcp\x00"+principal+"\x00"+h.Nonce), handle, nil
	}
	p, sig, ok := strings.Cut(handle, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(mac(s.key, p))) {
		return nil, "", errors.New("The session handle this call sent (_meta \"" + SessionMeta + "\") was not sealed by this gateway: it was altered, or sealed with another key; the call was not run. Send the handle the last result gave you, or none to begin a new session.")
	}
	var h sealedHandle
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil || json.Unmarshal(raw, &h) != nil || h.Nonce == "" {
		return nil, "", errors.New("The session handle this call sent cannot be read; the call was not run. Send the handle the last result gave you, or none to begin a new session.")
	}
	if !hmac.Equal([]byte(h.Principal), []byte(who)) {
		return nil, "", fmt.Errorf("The session handle this call sent (_meta %q) was sealed for another caller than %s, and a session is its caller's alone; the call was not run. Send the handle your own last result gave you, or none to begin a new session.", SessionMeta, principal)
	}
	if at := time.Unix(h.Issued, 0); time.Since(at) > SessionTTL {
		return nil, "", fmt.Errorf("The session handle this call sent was sealed at %s, longer ago than a session lasts (%s); the call was not run. Send none to begin a new session.", at.UTC().Format(time.RFC3339), SessionTTL)
	}
	return StoredSession(s.store, "mcp\x00"+principal+"\x00"+h.Nonce), handle, nil
}

// sessionDigest names a principal in a handle without spelling it.
func sessionDigest(principal string) string {
	d := sha256.Sum256([]byte("aimon-gw session principal\x00" + principal))
	return base64.RawURLEncoding.EncodeToString(d[:12])
}
