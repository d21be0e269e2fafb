// Package approvals has a person the policy names approve an asked call
// of an HTTP caller out of band (rule P15): the call becomes a pending
// approval with an id, kept in the gateway's state store so that every
// replica serves it; a webhook tells the approvers where it is; an
// approver decides on a page of the gateway's (/approvals/ID); the
// caller's retry then runs the call once, by the approval token sealed at
// the ask, which never leaves the gateway.
package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/front/mcpfront"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/state"
)

// Options configure New.
type Options struct {
	// Records keep the pending approvals and the decisions, shared by the
	// replicas (the state store; state.MemoryRecords for one process).
	Records state.Records
	// Key seals the page's forms (gateway.Approvals.Derive), the same in
	// every replica.
	Key []byte
	// Verifier tells who an approver is, from the same tokens as the
	// gateway's callers.
	Verifier auth.TokenVerifier
	// Webhook, when set, is POSTed each new pending approval as JSON with
	// a "text" field (a Slack or Teams incoming webhook takes it).
	Webhook string
	// BaseURL is this gateway as approvers reach it (https://gw.example);
	// the links are BaseURL/approvals/ID.
	BaseURL string
	// TTL is how long an approval is valid: the approval tokens'.
	TTL time.Duration
	// Decisions, when set, records each approver's decision.
	Decisions gateway.DecisionLog
	// Secure marks the login cookie Secure (served over TLS).
	Secure bool
	Logger *slog.Logger
	// Client posts the webhook; nil for one with a 5 s timeout.
	Client *http.Client
}

// Service is the out-of-band approvals of one gateway.
type Service struct {
	o  Options
	gw atomic.Pointer[gateway.Gateway]
}

// New returns the service; Attach gives it the gateway once it runs.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if o.TTL <= 0 {
		o.TTL = 10 * time.Minute
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	return &Service{o: o}
}

// Attach gives the service the gateway whose policy names the approvers.
func (s *Service) Attach(gw *gateway.Gateway) { s.gw.Store(gw) }

// SetBaseURL sets the links' base when it is known only once listening.
func (s *Service) SetBaseURL(u string) {
	if s.o.BaseURL == "" {
		s.o.BaseURL = strings.TrimSuffix(u, "/")
	}
}

// A pending approval, as kept in the store.
type pending struct {
	ID       string          `json:"id"`
	Tool     string          `json:"tool"`
	Input    json.RawMessage `json:"input"` // canonical (rule R7)
	Chain    []string        `json:"chain"`
	Asker    policy.Claims   `json:"asker"`
	Revision string          `json:"revision"`
	Entries  []string        `json:"entries"`
	Reason   string          `json:"reason"`
	// Approvers are the rules that cover the call, as they were when it
	// was asked: a later policy is another revision, which the token
	// refuses anyway.
	Approvers []policy.Approver `json:"approvers"`
	// Token is the approval sealed at the ask: what the retry runs with,
	// never shown to anyone.
	Token   string    `json:"token"`
	Asked   time.Time `json:"asked"`
	Expires time.Time `json:"expires"`
}

// A decision on a pending approval.
type decision struct {
	Approved bool          `json:"approved"`
	Approver policy.Claims `json:"approver"`
	At       time.Time     `json:"at"`
}

// kept is how long a record outlives its approval, so that a retry or a
// page of an expired one says so rather than "unknown".
const kept = time.Hour

// StatePrefix begins the request state of a pending approval.
const StatePrefix = "aimon-gw-approval:"

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Service) link(id string) string { return s.o.BaseURL + "/approvals/" + id }

// covering are the approvers of an asked call under the policy in force.
func (s *Service) covering(entries []string) []policy.Approver {
	gw := s.gw.Load()
	if gw == nil {
		return nil
	}
	var out []policy.Approver
	for _, a := range gw.Current().ApproversOf(entries) {
		out = append(out, *a)
	}
	return out
}

func callerOf(req *mcp.CallToolRequest) (policy.Claims, bool) {
	if req.Extra == nil {
		return policy.Claims{}, false
	}
	return authn.Claims(req.Extra.TokenInfo)
}

// binding names a call as its approval binds it, for a retry that
// carries no state (a client before 2026-07-28): who asked, on which
// chain, under which revision, the tool and its canonical input.
func (s *Service) binding(asker string, chain []string, revision, tool string, input json.RawMessage) string {
	m := hmac.New(sha256.New, s.o.Key)
	for _, part := range []string{asker, strings.Join(chain, "\x00"), revision, tool, string(input)} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return "approval-binding:" + hex.EncodeToString(m.Sum(nil))
}

func (s *Service) load(ctx context.Context, id string) (*pending, *decision, error) {
	b, ok, err := s.o.Records.Get(ctx, "approval:"+id)
	if err != nil || !ok {
		return nil, nil, err
	}
	var p pending
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, nil, fmt.Errorf("the pending approval %s cannot be read: %v", id, err)
	}
	b, ok, err = s.o.Records.Get(ctx, "approval-decision:"+id)
	if err != nil || !ok {
		return &p, nil, err
	}
	var d decision
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("the decision on approval %s cannot be read: %v", id, err)
	}
	return &p, &d, nil
}

// Ask makes an asked call that an approver covers a pending approval, or,
// when the same call (same caller, chain, revision, input) is pending
// already, answers by its state: still pending, denied, or approved, when
// the call runs now with its token.
func (s *Service) Ask(ctx context.Context, c mcpfront.OutOfBandCall) (*mcp.CallToolResult, error) {
	res, r := s.ask(ctx, c)
	if r != nil {
		return mcpfront.Reply(*r)
	}
	return res, nil
}

// ask is Ask's answer: a result of its own, or the call's (r).
func (s *Service) ask(ctx context.Context, c mcpfront.OutOfBandCall) (res *mcp.CallToolResult, r *gateway.CallResult) {
	a := c.Asked.Asked
	if a == nil {
		return nil, nil
	}
	approvers := s.covering(a.Entries)
	asker, ok := callerOf(c.Request)
	if len(approvers) == 0 || !ok {
		return nil, nil
	}
	name := c.Request.Params.Name
	input, err := json.Marshal(a.Input) // maps marshal with sorted keys
	if err != nil {
		return refused("%s needs an approver's approval, and its arguments cannot be kept (%v), so it was not run.", name, err), nil
	}
	bind := s.binding(asker.Subject, c.Chain, a.Revision, name, input)
	if b, ok, err := s.o.Records.Get(ctx, bind); err != nil {
		return s.storeDown(name, err), nil
	} else if ok && len(b) > 0 {
		if p, d, err := s.load(ctx, string(b)); err != nil {
			return s.storeDown(name, err), nil
		} else if p != nil && time.Now().Before(p.Expires) {
			switch {
			case d == nil:
				return s.pendingResult(c, p), nil
			case !d.Approved:
				// The denial answers this retry; the next asks anew.
				if err := s.o.Records.Put(ctx, bind, nil, time.Now().Add(time.Second)); err != nil {
					return s.storeDown(name, err), nil
				}
				return deniedResult(p, d), nil
			}
			r := c.Run(p.Token)
			if r.Approval == "" {
				return nil, &r
			}
			// Spent already: this call is asked anew, below.
			c.Asked = r
			if a = r.Asked; a == nil {
				return nil, nil
			}
		}
	}
	now := time.Now()
	p := &pending{ID: newID(), Tool: name, Input: input, Chain: c.Chain, Asker: asker, Revision: a.Revision,
		Entries: a.Entries, Reason: a.Reason, Approvers: approvers, Token: c.Asked.Approval,
		Asked: now.UTC(), Expires: now.Add(s.o.TTL).Truncate(time.Second).UTC()}
	b, _ := json.Marshal(p)
	if _, err := s.o.Records.Create(ctx, "approval:"+p.ID, b, p.Expires.Add(kept)); err != nil {
		return s.storeDown(name, err), nil
	}
	if err := s.o.Records.Put(ctx, bind, []byte(p.ID), p.Expires); err != nil {
		return s.storeDown(name, err), nil
	}
	s.o.Logger.Info("approval pending", "id", p.ID, "tool", name, "caller", asker.Subject, "approvers", who(approvers))
	go s.notify(p) // the caller's answer does not wait for the webhook
	return s.pendingResult(c, p), nil
}

// Resume answers a retry whose state names a pending approval: an
// unknown or expired one, another caller's, a denied one or one still
// pending is refused with a sentence (or asked again, pending); an
// approved one runs the call with its token, which the gateway spends
// once and opens only for the very call approved.
func (s *Service) Resume(ctx context.Context, st string, c mcpfront.OutOfBandCall) (*mcp.CallToolResult, error, bool) {
	id, ok := strings.CutPrefix(st, StatePrefix)
	if !ok {
		return nil, nil, false
	}
	name := c.Request.Params.Name
	if !idRE.MatchString(id) {
		return refused("The request state names no approval of this gateway (%q); send the call without it to ask again. %s was not run.", st, name), nil, true
	}
	p, d, err := s.load(ctx, id)
	if err != nil {
		return s.storeDown(name, err), nil, true
	}
	asker, _ := callerOf(c.Request)
	switch {
	case p == nil:
		return refused("The approval %s is unknown to this gateway (or expired long ago); send the call without its request state to ask again. %s was not run.", id, name), nil, true
	case p.Asker.Subject != asker.Subject:
		return refused("The approval %s was asked by another caller, and approves only that caller's call; %s was not run.", id, name), nil, true
	case !time.Now().Before(p.Expires):
		return refused("The approval %s expired at %s before it was used; send the call without its request state to ask again. %s was not run.", id, p.Expires.Format(time.RFC3339), name), nil, true
	case d == nil:
		return s.pendingResult(c, p), nil, true
	case !d.Approved:
		return deniedResult(p, d), nil, true
	}
	r := c.Run(p.Token)
	if r.Approval != "" {
		// The gateway did not take the token: already spent, or another
		// call. The fresh token it sealed is dropped with its sentence.
		reason := ""
		if r.Asked != nil {
			reason = " (" + r.Asked.Reason + ")"
		}
		return refused("The approval %s, which %s gave at %s, did not run this call%s; %s was not run. One approval runs the one call it was given for once: send the call without its request state to ask again.", id, d.Approver.Subject, d.At.Format(time.RFC3339), reason, name), nil, true
	}
	res, err := mcpfront.Reply(r)
	return res, err, true
}

// pendingResult tells the caller where its call waits: a client of
// 2026-07-28 that takes URL elicitations gets one, with the approval as
// its request state, to send back once the approver decided; any other a
// sentence saying where, and to send the same call again.
func (s *Service) pendingResult(c mcpfront.OutOfBandCall, p *pending) *mcp.CallToolResult {
	msg := fmt.Sprintf("%s is waiting for an approver's decision (%s) at %s, until %s.", p.Tool, who(p.Approvers), s.link(p.ID), p.Expires.Format(time.RFC3339))
	if !c.Legacy && urlElicitation(c.Capabilities) {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"approval": &mcp.ElicitParams{Mode: "url", URL: s.link(p.ID), ElicitationID: p.ID,
				Message: p.Reason + " " + msg + " Answer once the approver has decided."}},
			RequestState: StatePrefix + p.ID,
		}
	}
	return refused("%s %s It was not run: send the same call again once the approver has decided (approval %s).", p.Reason, msg, p.ID)
}

func deniedResult(p *pending, d *decision) *mcp.CallToolResult {
	return refused("%s denied this call of %s at %s on the approval page (approval %s), so it was not run.", d.Approver.Subject, p.Tool, d.At.Format(time.RFC3339), p.ID)
}

func (s *Service) storeDown(tool string, err error) *mcp.CallToolResult {
	s.o.Logger.Error("approvals: the state store failed", "cause", err)
	return refused("%s needs an approver's approval, and the approvals cannot be kept now (%v), so it was not run; try again once the state store is back.", tool, err)
}

func refused(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func urlElicitation(c *mcp.ClientCapabilities) bool {
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// who names the approvers in a sentence.
func who(as []policy.Approver) string {
	var names []string
	for _, a := range as {
		if w := a.Who(); !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	return "approvers: " + strings.Join(names, " or ")
}
