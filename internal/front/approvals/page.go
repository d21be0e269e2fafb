package approvals

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/runtime/decisionlog"
)

// How a browser approver authenticates: with the same bearer token its
// MCP client would send (a JWT of the gateway's issuer, or a static
// token), pasted once into the page's login form; the gateway checks it
// with its own verifier and keeps it in an HttpOnly, SameSite=Strict
// cookie scoped to /approvals/, checked again on every request (so a
// JWT's expiry ends the session). A client that sends Authorization:
// Bearer needs no cookie.
const cookieName = "aimon_gw_approver"

// Handler serves /approvals/ID: the page (GET), the decision (POST, with
// the page's CSRF token) and the login form (POST /approvals/ID/login).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /approvals/{id}", s.page)
	mux.HandleFunc("POST /approvals/{id}", s.decide)
	mux.HandleFunc("POST /approvals/{id}/login", s.login)
	return mux
}

// viewer is who is looking at a page.
type viewer struct {
	claims policy.Claims
	token  string
}

// authenticate is the request's approver, from its bearer header or its
// cookie; why says why there is none.
func (s *Service) authenticate(r *http.Request) (*viewer, string) {
	tok := ""
	if f := strings.Fields(r.Header.Get("Authorization")); len(f) == 2 && strings.EqualFold(f[0], "bearer") {
		tok = f[1]
	} else if c, err := r.Cookie(cookieName); err == nil {
		tok = c.Value
	}
	if tok == "" {
		return nil, "Sign in with your bearer token for this gateway to see this approval."
	}
	return s.verify(r.Context(), tok, r)
}

func (s *Service) verify(ctx context.Context, tok string, r *http.Request) (*viewer, string) {
	ti, err := s.o.Verifier(ctx, tok, r)
	if err != nil {
		return nil, sentence(err.Error())
	}
	c, ok := authn.Claims(ti)
	if !ok {
		return nil, "The token names no caller; sign in with a token of this gateway's."
	}
	return &viewer{claims: c, token: tok}, ""
}

func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// csrf is the form token of the page of id as v sees it: bound to the
// approval, the approver and the session's token, sealed with the key
// every replica shares.
func (s *Service) csrf(id string, v *viewer) string {
	h := sha256.Sum256([]byte(v.token))
	m := hmac.New(sha256.New, s.o.Key)
	m.Write([]byte("csrf\x00" + id + "\x00" + v.claims.Subject + "\x00"))
	m.Write(h[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// may says why v may not decide p ("" when v may): v must be one of an
// approver rule's people, and not the caller who asked unless that rule
// lets it (self).
func may(p *pending, v *viewer) string {
	own := v.claims.Subject == p.Asker.Subject
	for _, a := range p.Approvers {
		if a.Admits(v.claims) && (!own || a.Self) {
			return ""
		}
	}
	for _, a := range p.Approvers {
		if a.Admits(v.claims) {
			return fmt.Sprintf("You (%s) asked for this call yourself, and its approvers may not approve their own calls; another approver (%s) must decide it.", v.claims.Subject, who(p.Approvers))
		}
	}
	return fmt.Sprintf("You (%s) may not decide this call: its %s.", strings.TrimPrefix(v.claims.String(), "The caller with "), who(p.Approvers))
}

// view is what the page template shows.
type view struct {
	ID, Tool, Input, Chain, Asker, Revision, Reason, Entries, Approvers, Expires string
	Status, Problem, Message, CSRF, Viewer                                       string
	Form, Login                                                                  bool
}

func (s *Service) view(p *pending, d *decision, v *viewer) view {
	var in bytes.Buffer
	json.Indent(&in, p.Input, "", "  ")
	w := view{ID: p.ID, Tool: p.Tool, Input: in.String(), Chain: strings.Join(p.Chain, " → "), Asker: strings.TrimPrefix(p.Asker.String(), "The caller with "),
		Revision: p.Revision, Reason: p.Reason, Entries: strings.Join(p.Entries, ", "), Approvers: strings.TrimPrefix(who(p.Approvers), "approvers: "),
		Expires: p.Expires.Format(time.RFC3339), Status: "pending"}
	switch {
	case d != nil && d.Approved:
		w.Status = fmt.Sprintf("approved by %s at %s", d.Approver.Subject, d.At.Format(time.RFC3339))
	case d != nil:
		w.Status = fmt.Sprintf("denied by %s at %s", d.Approver.Subject, d.At.Format(time.RFC3339))
	case !time.Now().Before(p.Expires):
		w.Status = "expired"
	}
	if v != nil {
		w.Viewer = v.claims.Subject
		w.Problem = may(p, v)
		w.Form = w.Problem == "" && w.Status == "pending"
		w.CSRF = s.csrf(p.ID, v)
	}
	return w
}

// signedIn is the request's approver and the approval id it names, or nil
// when the request was answered with the login form.
func (s *Service) signedIn(w http.ResponseWriter, r *http.Request) (*viewer, string) {
	id := r.PathValue("id")
	v, why := s.authenticate(r)
	if v == nil {
		s.render(w, http.StatusUnauthorized, view{ID: id, Login: idRE.MatchString(id), Problem: why})
	}
	return v, id
}

func (s *Service) page(w http.ResponseWriter, r *http.Request) {
	v, id := s.signedIn(w, r)
	if v == nil {
		return
	}
	p, d, status := s.find(w, r, id)
	if p == nil {
		return
	}
	page := s.view(p, d, v)
	if page.Problem != "" {
		status = http.StatusForbidden
	}
	s.render(w, status, page)
}

// find loads the approval of id, or answers the request itself (nil).
func (s *Service) find(w http.ResponseWriter, r *http.Request, id string) (*pending, *decision, int) {
	if !idRE.MatchString(id) {
		s.render(w, http.StatusNotFound, view{Problem: fmt.Sprintf("%q is not an approval id of this gateway; open the link the notification gave.", id)})
		return nil, nil, 0
	}
	p, d, err := s.load(r.Context(), id)
	switch {
	case err != nil:
		s.o.Logger.Error("approvals: the state store failed", "cause", err)
		s.render(w, http.StatusServiceUnavailable, view{Problem: fmt.Sprintf("The approvals cannot be read now (%v); try again once the state store is back.", err)})
		return nil, nil, 0
	case p == nil:
		s.render(w, http.StatusNotFound, view{Problem: fmt.Sprintf("There is no approval %s: it is unknown to this gateway, or expired long ago. The caller must ask again.", id)})
		return nil, nil, 0
	}
	return p, d, http.StatusOK
}

func (s *Service) decide(w http.ResponseWriter, r *http.Request) {
	v, id := s.signedIn(w, r)
	if v == nil {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.render(w, http.StatusBadRequest, view{Problem: "The form cannot be read; reload the page and decide again."})
		return
	}
	p, d, _ := s.find(w, r, id)
	if p == nil {
		return
	}
	page := s.view(p, d, v)
	choice := r.PostForm.Get("decision")
	switch {
	case page.Problem != "":
		page.Form = false
		s.render(w, http.StatusForbidden, page)
		return
	case !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(s.csrf(id, v))):
		page.Form, page.Problem = false, "The form's CSRF token is not this page's: the decision was not taken. Reload the page and decide again."
		s.render(w, http.StatusForbidden, page)
		return
	case d != nil:
		page.Problem = "This approval was decided already (" + page.Status + "); nothing changed."
		s.render(w, http.StatusConflict, page)
		return
	case page.Status == "expired":
		page.Problem = fmt.Sprintf("This approval expired at %s: nothing was decided, and the caller must ask again.", page.Expires)
		s.render(w, http.StatusGone, page)
		return
	case choice != "approve" && choice != "deny":
		page.Problem = fmt.Sprintf("The decision %q is neither approve nor deny; nothing was decided.", choice)
		s.render(w, http.StatusBadRequest, page)
		return
	}
	nd := decision{Approved: choice == "approve", Approver: v.claims, At: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(nd)
	first, err := s.o.Records.Create(r.Context(), "approval-decision:"+id, b, p.Expires.Add(kept))
	if err != nil {
		s.o.Logger.Error("approvals: the state store failed", "cause", err)
		page.Problem = fmt.Sprintf("The decision cannot be kept now (%v), so it was not taken; try again once the state store is back.", err)
		s.render(w, http.StatusServiceUnavailable, page)
		return
	}
	if !first {
		_, d, _ = s.load(r.Context(), id)
		page = s.view(p, d, v)
		page.Problem = "Another approver decided first (" + page.Status + "); nothing changed."
		s.render(w, http.StatusConflict, page)
		return
	}
	s.record(p, nd)
	page = s.view(p, &nd, v)
	page.Message = "Your decision is taken: the call is " + page.Status + "."
	s.render(w, http.StatusOK, page)
}

// record writes the approver's decision to the decision log: who decided
// which call, when (rule R10; the run that follows has its own records).
func (s *Service) record(p *pending, d decision) {
	verb := "denied"
	if d.Approved {
		verb = "approved"
	}
	s.o.Logger.Info("approval "+verb, "id", p.ID, "tool", p.Tool, "caller", p.Asker.Subject, "approver", d.Approver.Subject)
	if s.o.Decisions == nil {
		return
	}
	err := s.o.Decisions.Log(decisionlog.Record{Time: d.At, Phase: decisionlog.Approval, CallID: "approval_" + p.ID, Tool: p.Tool, Surface: p.Chain,
		Principal: p.Asker.Subject, Allowed: d.Approved, Ask: true, Rule: rule.P15, Entries: p.Entries, Revision: p.Revision,
		Reason:   fmt.Sprintf("%s %s this call of %s on the approval page at %s.", d.Approver.Subject, verb, p.Tool, d.At.Format(time.RFC3339)),
		Approver: d.Approver.Subject, ApprovalID: p.ID})
	if err != nil {
		s.o.Logger.Error("approvals: the decision log cannot be written", "cause", err)
	}
}

func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idRE.MatchString(id) {
		s.render(w, http.StatusNotFound, view{Problem: fmt.Sprintf("%q is not an approval id of this gateway; open the link the notification gave.", id)})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	tok := ""
	if r.ParseForm() == nil {
		tok = strings.TrimSpace(r.PostForm.Get("token"))
	}
	if tok == "" {
		s.render(w, http.StatusUnauthorized, view{ID: id, Login: true, Problem: "No token was given; paste your bearer token for this gateway."})
		return
	}
	if v, why := s.verify(r.Context(), tok, r); v == nil {
		s.render(w, http.StatusUnauthorized, view{ID: id, Login: true, Problem: why})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/approvals/", HttpOnly: true, Secure: s.o.Secure || r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int((8 * time.Hour).Seconds())})
	http.Redirect(w, r, "/approvals/"+id, http.StatusSeeOther)
}

func (s *Service) render(w http.ResponseWriter, status int, v view) {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, v); err != nil {
		http.Error(w, "The page cannot be shown: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// No script, no frame, forms to this gateway only.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>aimon-gw approval{{if .ID}} {{.ID}}{{end}}</title>
<style>body{font-family:sans-serif;max-width:50em;margin:2em auto;padding:0 1em}th{text-align:left;vertical-align:top;padding-right:1em}pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap;word-break:break-all}.problem{color:#a00}.message{color:#060}button{font-size:1.1em;margin-right:1em}</style>
</head><body>
<h1>aimon-gw approval</h1>
{{if .Problem}}<p class="problem" id="problem">{{.Problem}}</p>{{end}}
{{if .Message}}<p class="message" id="message">{{.Message}}</p>{{end}}
{{if .Login}}
<form method="post" action="/approvals/{{.ID}}/login" id="login">
<p><label for="token">Your bearer token for this gateway (the one your MCP client sends):</label></p>
<p><input type="password" name="token" id="token" size="60" autocomplete="off"></p>
<p><button type="submit" id="signin">Sign in</button></p>
</form>
{{else if .Tool}}
<table>
<tr><th>Status</th><td id="status">{{.Status}}</td></tr>
<tr><th>Tool</th><td id="tool">{{.Tool}}</td></tr>
<tr><th>Arguments</th><td><pre id="input">{{.Input}}</pre></td></tr>
<tr><th>Surface chain</th><td id="chain">{{.Chain}}</td></tr>
<tr><th>Asked by</th><td id="asker">{{.Asker}}</td></tr>
<tr><th>Policy revision</th><td id="revision">{{.Revision}}</td></tr>
<tr><th>Why it asks</th><td id="reason">{{.Reason}}</td></tr>
<tr><th>Ask entries</th><td id="entries">{{.Entries}}</td></tr>
<tr><th>Approvers</th><td id="approvers">{{.Approvers}}</td></tr>
<tr><th>Expires</th><td id="expires">{{.Expires}}</td></tr>
<tr><th>You</th><td id="viewer">{{.Viewer}}</td></tr>
</table>
{{if .Form}}
<form method="post" action="/approvals/{{.ID}}" id="decide">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<p>Approving runs this exact call, once, when its caller sends it again before it expires.</p>
<button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
{{end}}
{{end}}
</body></html>
`))
