package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/authntest"
	"aimon.dev/gw/internal/testkit/need"
)

// approversPolicy asks before every mkdir, and has the release managers
// approve it out of band.
const approversPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {Bash: schema.#Bash & {sandbox: mode: "off"}, Echo: schema.#Echo}
agent: {"allowed-tools": ["Bash(mkdir:*)", "Echo"], "ask-tools": ["Bash(mkdir:*)"]}
approvers: release: {group: "release-managers", ask: ["Bash(mkdir:*)"]}
principals: dev: {group: "dev", surface: ["agent"]}
`

// approverRig is a gateway with approvers, the identity provider whose
// JWTs it takes, the webhook receiver it notifies, and the people.
type approverRig struct {
	t       *testing.T
	g       *httpGW
	args    []string // the gateway's, for a replica
	wd      string
	dlog    string
	hooks   chan map[string]any
	tokens  map[string]string // subject → JWT
	browser context.Context
}

func newApproverRig(t *testing.T, browser context.Context, args ...string) *approverRig {
	iss := authntest.New(t)
	r := &approverRig{t: t, wd: t.TempDir(), dlog: filepath.Join(t.TempDir(), "decisions.jsonl"), hooks: make(chan map[string]any, 16),
		tokens: map[string]string{}, browser: browser}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var n map[string]any
		if req.Header.Get("Content-Type") != "application/json" || json.NewDecoder(req.Body).Decode(&n) != nil {
			http.Error(w, "not JSON", 400)
			n = map[string]any{"bad": true}
		}
		r.hooks <- n
	}))
	t.Cleanup(hook.Close)
	for who, groups := range map[string][]string{"alice": {"dev", "release-managers"}, "rm": {"dev", "release-managers"}, "eve": {"dev"}} {
		c := iss.Claims(who, "aimon-gw-test")
		c["groups"] = groups
		r.tokens[who] = iss.Token(t, c)
	}
	// Another session of rm's: a token of its own.
	c := iss.Claims("rm", "aimon-gw-test")
	c["groups"], c["jti"] = []string{"release-managers"}, "second"
	r.tokens["rm2"] = iss.Token(t, c)
	dir := moduleDir(t, approversPolicy)
	r.args = append([]string{"--policy", dir, "--workdir", r.wd, "--issuer", iss.URL, "--audience", "aimon-gw-test",
		"--approval-webhook", hook.URL + "/services/T0/B0/secret"}, args...)
	r.g = startHTTP(t, http.DefaultClient, append([]string{"--decision-log", r.dlog}, r.args...)...)
	return r
}

// replica is a second gateway as the first: same policy, issuer, webhook
// and arguments (a replica behind the same load balancer).
func (r *approverRig) replica() *httpGW { return startHTTP(r.t, http.DefaultClient, r.args...) }

// webhook is the next notice the webhook received; its link must be to
// this gateway's approval page.
func (r *approverRig) webhook() (text, link string) {
	r.t.Helper()
	select {
	case n := <-r.hooks:
		text, _ = n["text"].(string)
		a, _ := n["approval"].(map[string]any)
		link, _ = a["url"].(string)
		if !strings.HasPrefix(link, r.g.base+"/approvals/") || !strings.Contains(text, link) {
			r.t.Fatalf("the webhook's notice has no link to the approval page in its text: %v", n)
		}
		return text, link
	case <-time.After(30 * time.Second):
		r.t.Fatalf("no webhook notice came: %s", r.g.logs())
	}
	return "", ""
}

// page is what a person saw on an approval page.
type page struct {
	status, tool, input, chain, asker, revision, problem, message string
	form                                                          bool
}

// visit opens link in a browser context of who's own (its own cookies),
// signs in with who's token on the login form, and, when decide is
// "approve" or "deny", presses that button.
func (r *approverRig) visit(who, link, decide string) page {
	r.t.Helper()
	ctx, cancel := chromedp.NewContext(r.browser, chromedp.WithNewBrowserContext())
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()
	var p page
	err := chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), r.tokens[who]),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("status")),
	)
	if err != nil {
		r.t.Fatalf("%s at %s: %v", who, link, err)
	}
	if decide != "" {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID(decide)), chromedp.WaitVisible(chromedp.ID("message"))); err != nil {
			r.t.Fatalf("%s pressing %s at %s: %v", who, decide, link, err)
		}
		p.message = r.text(ctx, "message")
	}
	p.status, p.tool, p.input, p.chain = r.text(ctx, "status"), r.text(ctx, "tool"), r.text(ctx, "input"), r.text(ctx, "chain")
	p.asker, p.revision = r.text(ctx, "asker"), r.text(ctx, "revision")
	buttons, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#approve"), chromedp.AtLeast(0)))
	if err != nil {
		r.t.Fatalf("%s reading %s: %v", who, link, err)
	}
	p.form = len(buttons) > 0
	if problems, _ := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#problem"), chromedp.AtLeast(0))); len(problems) > 0 {
		p.problem = r.text(ctx, "problem")
	}
	return p
}

// text is the text of the element with id on the page ctx shows.
func (r *approverRig) text(ctx context.Context, id string) string {
	r.t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		r.t.Fatalf("the page's #%s: %v", id, err)
	}
	return s
}

// approverBrowser starts Debian's chromium, headless, with a fresh
// profile; under CI a missing chromium fails the test.
func approverBrowser(t *testing.T) context.Context {
	t.Helper()
	bin := "/usr/bin/chromium"
	if _, err := os.Stat(bin); err != nil {
		bin = need.Command(t, "chromium", "the approval page's tests drive it (apt-get install chromium)")
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		// Its singleton socket's directory, which a killed browser leaves.
		chromedp.Env("TMPDIR="+t.TempDir()))
	t.Cleanup(cancel)
	browser, cancelB := chromedp.NewContext(alloc)
	t.Cleanup(cancelB)
	// The first run starts the browser, which lives as long as the context
	// of that run: the test's (chromium exits or answers; a page's waits
	// are bounded in visit).
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("chromium does not start: %v", err)
	}
	return browser
}

// urlAsk is a client of 2026-07-28 that takes URL elicitations: its
// handler is called with the approval's link, and answers what it returns.
func urlAsk(handler func(link, id string) string) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "url" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: handler(req.Params.URL, req.Params.ElicitationID)}, nil
		},
	}
}

func mkdirCall(path string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": "mkdir " + path}}
}

// TestP15ApproverApprovesOutOfBand: an asked call from an HTTP client that
// an approver rule covers waits as a pending approval: the webhook gets
// its link, the client a URL elicitation to it, and the call does not run.
// In a real chromium, a non-approver and the asker (an approver too, but
// not of its own call) are shown the call and refused; an approver sees
// the exact tool, canonical arguments, chain, asker and revision and
// approves; the approval sent with another call or by another caller runs
// nothing; the client's retry then runs the call once, and a second retry
// with the same approval is refused and runs nothing. The decision
// log records the approver and the time.
func TestP15ApproverApprovesOutOfBand(t *testing.T) {
	t.Parallel()
	r := newApproverRig(t, approverBrowser(t))
	target := filepath.Join(r.wd, "released")
	// The client's handler shows the link (here: hands it to the test)
	// and answers once the person says the approver has decided.
	asked, decided := make(chan [2]string, 1), make(chan struct{})
	s := r.g.session(r.tokens["alice"], "", urlAsk(func(l, id string) string {
		asked <- [2]string{l, id}
		select {
		case <-decided:
			return "accept"
		case <-time.After(5 * time.Minute):
			return "cancel"
		}
	}))
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.CallTool(context.Background(), mkdirCall(target))
		done <- outcome{res, err}
	}()
	var link, id string
	select {
	case a := <-asked:
		link, id = a[0], a[1]
	case o := <-done:
		t.Fatalf("the asked call was answered without a URL elicitation: %+v %v", o.res, o.err)
	case <-time.After(60 * time.Second):
		t.Fatalf("no URL elicitation came: %s", r.g.logs())
	}
	text, hooked := r.webhook()
	if hooked != link || !strings.Contains(text, "alice asks to run Bash") || !strings.Contains(text, `mkdir `+target) {
		t.Errorf("the webhook's notice %q (%s) is not of this call at %s", text, hooked, link)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the call ran before anyone approved it")
	}
	eve := r.visit("eve", link, "")
	if eve.form || !strings.Contains(eve.problem, `You (subject "eve", groups ["dev"]) may not decide this call: its approvers: group "release-managers"`) {
		t.Errorf("a non-approver's page: %+v", eve)
	}
	own := r.visit("alice", link, "")
	if own.form || !strings.Contains(own.problem, "You (alice) asked for this call yourself") {
		t.Errorf("the asker's own page: %+v", own)
	}
	rm := r.visit("rm", link, "approve")
	if rm.tool != "Bash" || !strings.Contains(rm.input, `"command": "mkdir `+target+`"`) || rm.chain != "agent" ||
		!strings.Contains(rm.asker, `subject "alice"`) || len(rm.revision) < 8 || !strings.HasPrefix(rm.status, "approved by rm at ") ||
		!strings.Contains(rm.message, "Your decision is taken") {
		t.Errorf("the approver's page: %+v", rm)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the call ran on the approval, before its client sent it again")
	}
	state := "aimon-gw-approval:" + id
	// The approval sent with another call, or by another caller, runs
	// nothing, and leaves the approval to its own call.
	raw := r.g.session(r.tokens["alice"], "", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	evesRaw := r.g.session(r.tokens["eve"], "", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	other := filepath.Join(r.wd, "other")
	for _, tc := range []struct {
		note string
		s    *mcp.ClientSession
		call *mcp.CallToolParams
		says string
	}{
		{"another call", raw, mkdirCall(other), "did not run this call"},
		{"another caller", evesRaw, mkdirCall(target), "was asked by another caller"},
	} {
		tc.call.RequestState, tc.call.InputResponses = state, mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}
		if res, err := tc.s.CallTool(context.Background(), tc.call); err != nil || !res.IsError || !strings.Contains(resultText(res), tc.says) {
			t.Errorf("the approval with %s: %v %q", tc.note, err, resultText(res))
		}
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("the approval ran another call")
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("another caller's retry ran the call")
	}
	close(decided)
	var o outcome
	select {
	case o = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the approved retry was not answered")
	}
	if o.err != nil || o.res.IsError {
		t.Fatalf("the approved retry: %v %q %s", o.err, resultText(o.res), r.g.logs())
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("the approved call did not run: %v", err)
	}
	os.Remove(target)
	// The same approval sent again, by hand: refused, nothing runs.
	again := mkdirCall(target)
	again.RequestState, again.InputResponses = state, mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}
	res, err := raw.CallTool(context.Background(), again)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "did not run this call") || !strings.Contains(resultText(res), "already used") {
		t.Errorf("a second retry with the approval: %v %q", err, resultText(res))
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("a second retry ran the call again")
	}
	r.g.stop()
	var approvals, runs int
	for _, rec := range readRecords(t, r.dlog) {
		switch {
		case rec["phase"] == "approval":
			approvals++
			if rec["approver"] != "rm" || rec["principal"] != "alice" || rec["allowed"] != true || !strings.Contains(fmt.Sprint(rec["approval_id"]), strings.TrimPrefix(state, "aimon-gw-approval:")) || rec["time"] == nil {
				t.Errorf("the approval's record: %v", rec)
			}
		case rec["phase"] == "running" && rec["tool"] == "Bash":
			runs++
		}
	}
	if approvals != 1 || runs != 1 {
		t.Errorf("the decision log holds %d approvals and %d runs of Bash, want 1 and 1", approvals, runs)
	}
	if strings.Contains(r.g.logs(), "secret") {
		t.Error("the logs hold the webhook's URL")
	}
}

// TestP15ApproverDeniesOutOfBand: a call the approver denies on the page
// is refused, with a sentence naming who denied it, when the client sends
// it again; it never runs. A client before 2026-07-28 (no input request
// over stateless HTTP) is told where its call waits, in a sentence, and
// its plain retry of the same call is answered by the decision.
func TestP15ApproverDeniesOutOfBand(t *testing.T) {
	t.Parallel()
	r := newApproverRig(t, approverBrowser(t))
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			target := filepath.Join(r.wd, "denied"+version)
			s := r.g.session(r.tokens["alice"], version, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}})
			res, err := s.CallTool(context.Background(), mkdirCall(target))
			if err != nil {
				t.Fatal(err)
			}
			_, link := r.webhook()
			retry := mkdirCall(target)
			if version == "" {
				req, ok := res.InputRequests["approval"].(*mcp.ElicitParams)
				if !res.NeedsInput() || !ok || req.Mode != "url" || req.URL != link || !strings.HasPrefix(res.RequestState, "aimon-gw-approval:") {
					t.Fatalf("a pending approval's answer to a 2026-07-28 client: %+v", res)
				}
				retry.RequestState, retry.InputResponses = res.RequestState, mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}
			} else if !res.IsError || !strings.Contains(resultText(res), "is waiting for an approver's decision") || !strings.Contains(resultText(res), link) {
				t.Fatalf("a pending approval's answer to a %s client: %q", version, resultText(res))
			}
			// Pending still: the retry is told so, and nothing runs.
			if res, _ := s.CallTool(context.Background(), retry); version != "" && !strings.Contains(resultText(res), link) || version == "" && res.RequestState != retry.RequestState {
				t.Errorf("a retry while pending: %+v %q", res, resultText(res))
			}
			if p := r.visit("rm", link, "deny"); !strings.HasPrefix(p.status, "denied by rm at ") {
				t.Errorf("the approver's page after denying: %+v", p)
			}
			res, err = s.CallTool(context.Background(), retry)
			if err != nil || !res.IsError || !strings.Contains(resultText(res), "rm denied this call of Bash at ") {
				t.Errorf("the retry of a denied call: %v %q", err, resultText(res))
			}
			if _, err := os.Stat(target); err == nil {
				t.Error("a denied call ran")
			}
		})
	}
	// A legacy client's approved call runs on its plain retry.
	target := filepath.Join(r.wd, "approved-legacy")
	s := r.g.session(r.tokens["alice"], "2025-11-25", nil)
	s.CallTool(context.Background(), mkdirCall(target))
	_, link := r.webhook()
	r.visit("rm", link, "approve")
	if res, err := s.CallTool(context.Background(), mkdirCall(target)); err != nil || res.IsError {
		t.Errorf("a legacy client's approved retry: %v %q", err, resultText(res))
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the legacy client's approved call did not run: %v", err)
	}
}

// TestP15ApproverExpiredAndBadInput: an approval past its expiry can be
// neither approved on the page nor used by a retry; an unknown or
// malformed id, a forged CSRF token, a bad login token and a request
// state naming no approval are refused with a sentence, and nothing is
// decided or run.
func TestP15ApproverExpiredAndBadInput(t *testing.T) {
	t.Parallel()
	r := newApproverRig(t, approverBrowser(t), "--approval-ttl", "2s")
	target := filepath.Join(r.wd, "late")
	s := r.g.session(r.tokens["alice"], "", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}})
	res, err := s.CallTool(context.Background(), mkdirCall(target))
	if err != nil || !res.NeedsInput() {
		t.Fatalf("%v %+v", err, res)
	}
	_, link := r.webhook()
	id := strings.TrimPrefix(res.RequestState, "aimon-gw-approval:")

	// Over plain HTTP with a bearer header: the page and its CSRF token.
	send := func(method, path, who string, form url.Values) (int, string) {
		req, _ := http.NewRequest(method, r.g.base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if who != "" {
			req.Header.Set("Authorization", "Bearer "+r.tokens[who])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(path, who string) (int, string) { return send("GET", path, who, nil) }
	post := func(path, who string, form url.Values) (int, string) { return send("POST", path, who, form) }
	_, body := get("/approvals/"+id, "rm")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if csrf == nil {
		t.Fatalf("the approver's page has no form: %s", body)
	}
	for _, tc := range []struct {
		note   string
		status int
		says   string
		do     func() (int, string)
	}{
		{"no token", 401, "Sign in with your bearer token", func() (int, string) { return get("/approvals/"+id, "") }},
		{"an unknown id", 404, "There is no approval AAAAAAAAAAAAAAAAAAAAAA", func() (int, string) { return get("/approvals/AAAAAAAAAAAAAAAAAAAAAA", "rm") }},
		{"a malformed id", 404, "is not an approval id of this gateway", func() (int, string) { return get("/approvals/..%2f..%2fetc", "rm") }},
		{"a forged CSRF token", 403, "CSRF token is not this page&#39;s", func() (int, string) {
			return post("/approvals/"+id, "rm", url.Values{"csrf": {"forged"}, "decision": {"approve"}})
		}},
		{"another session's CSRF token", 403, "CSRF token is not this page&#39;s", func() (int, string) {
			return post("/approvals/"+id, "rm2", url.Values{"csrf": {csrf[1]}, "decision": {"approve"}})
		}},
		{"a non-approver, with an approver's form", 403, "may not decide this call", func() (int, string) {
			return post("/approvals/"+id, "eve", url.Values{"csrf": {csrf[1]}, "decision": {"approve"}})
		}},
		{"the asker, with an approver's form", 403, "asked for this call yourself", func() (int, string) {
			return post("/approvals/"+id, "alice", url.Values{"csrf": {csrf[1]}, "decision": {"approve"}})
		}},
		{"a decision that is neither", 400, "is neither approve nor deny", func() (int, string) {
			return post("/approvals/"+id, "rm", url.Values{"csrf": {csrf[1]}, "decision": {"maybe"}})
		}},
		{"a login with a bad token", 401, "The bearer token is not a JWT", func() (int, string) {
			return post("/approvals/"+id+"/login", "", url.Values{"token": {"not-a-jwt"}})
		}},
	} {
		if status, body := tc.do(); status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d, want %d saying %q: %s", tc.note, status, tc.status, tc.says, body)
		}
	}
	if _, body := get("/approvals/"+id, "rm"); !strings.Contains(body, `<td id="status">pending</td>`) {
		t.Errorf("bad input decided the approval: %s", body)
	}
	// A state naming no approval of this gateway's, or another's id.
	for _, st := range []string{"aimon-gw-approval:nope", "aimon-gw-approval:AAAAAAAAAAAAAAAAAAAAAA"} {
		c := mkdirCall(target)
		c.RequestState, c.InputResponses = st, mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}
		if res, err := s.CallTool(context.Background(), c); err != nil || !res.IsError || !strings.Contains(resultText(res), "was not run") {
			t.Errorf("state %s: %v %q", st, err, resultText(res))
		}
	}
	// Past its expiry (2 s): the page refuses the approval, and the retry.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, body := get("/approvals/"+id, "rm"); strings.Contains(body, `<td id="status">expired</td>`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval never expired")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if status, body := post("/approvals/"+id, "rm", url.Values{"csrf": {csrf[1]}, "decision": {"approve"}}); status != 410 || !strings.Contains(body, "expired at") {
		t.Errorf("approving an expired approval: %d %s", status, body)
	}
	if p := r.visit("rm", link, ""); p.form || p.status != "expired" {
		t.Errorf("an expired approval's page in the browser: %+v", p)
	}
	c := mkdirCall(target)
	c.RequestState, c.InputResponses = res.RequestState, mcp.InputResponseMap{"approval": &mcp.ElicitResult{Action: "accept"}}
	if res, err := s.CallTool(context.Background(), c); err != nil || !res.IsError || !strings.Contains(resultText(res), "expired at") {
		t.Errorf("the retry of an expired approval: %v %q", err, resultText(res))
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("an expired approval ran its call")
	}
}

// TestR10ApprovalPendingOnEveryReplica: two replicas sharing the approval
// key and a real Redis: a call asked on one waits on both; its page on the
// other shows it and takes the approver's decision (over plain HTTP with
// a bearer header, no browser); the retry on that other replica runs it
// once, and the same call sent again to the first is a new ask, which runs
// nothing until approved in turn.
func TestR10ApprovalPendingOnEveryReplica(t *testing.T) {
	t.Parallel()
	addr, _ := startRedis(t)
	r := newApproverRig(t, nil, "--approval-key", approvalKey(t), "--state", "redis://"+addr)
	b := r.replica()
	target := filepath.Join(r.wd, "shared")
	alice := r.g.session(r.tokens["alice"], "2025-11-25", nil)
	res, err := alice.CallTool(context.Background(), mkdirCall(target))
	if err != nil || !res.IsError {
		t.Fatalf("%v %q", err, resultText(res))
	}
	_, link := r.webhook()
	id := link[strings.LastIndex(link, "/")+1:]
	req, _ := http.NewRequest("GET", b.base+"/approvals/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+r.tokens["rm"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || csrf == nil || !strings.Contains(string(body), "mkdir "+target) {
		t.Fatalf("the other replica's page: %d %s", resp.StatusCode, body)
	}
	form := url.Values{"csrf": {csrf[1]}, "decision": {"approve"}}
	req, _ = http.NewRequest("POST", b.base+"/approvals/"+id, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+r.tokens["rm"])
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("approving on the other replica: %v %v", err, resp)
	}
	resp.Body.Close()
	onB := b.session(r.tokens["alice"], "2025-11-25", nil)
	if res, err := onB.CallTool(context.Background(), mkdirCall(target)); err != nil || res.IsError {
		t.Fatalf("the retry on the other replica: %v %q", err, resultText(res))
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the approved call did not run: %v", err)
	}
	os.Remove(target)
	res, err = alice.CallTool(context.Background(), mkdirCall(target))
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "is waiting for an approver's decision") || strings.Contains(resultText(res), id) {
		t.Errorf("the same call again on the first replica: %v %q", err, resultText(res))
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the approval ran its call twice")
	}
}

// TestP15VetReportsApprovers: aimon-gw vet passes a policy whose
// approvers cover its ask entries, and reports at its place an approver
// entry that no ask-tools holds, and one that names no one.
func TestP15VetReportsApprovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		note, body string
		fails      bool
		says       string
	}{
		{"covering", approversPolicy, false, ""},
		{"an entry no ask-tools holds", strings.Replace(approversPolicy, `ask: ["Bash(mkdir:*)"]}`, `ask: ["Bash(git push:*)"]}`, 1), true,
			`approver "release" approves "Bash(git push:*)", which no surface's ask-tools holds`},
		{"no one", strings.Replace(approversPolicy, `group: "release-managers", `, "", 1), true, `approver "release" names no one`},
	} {
		out, err := exec.Command(gatewayBinary(t), "vet", moduleDir(t, tc.body)).CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.says) || tc.fails && !strings.Contains(string(out), "policy.cue:") {
			t.Errorf("%s: %v %s", tc.note, err, out)
		}
	}
}
