package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// notice is what the webhook is POSTed: "text" is what a Slack or Teams
// incoming webhook shows (with the link, which both make clickable);
// "approval" is the same for a receiver of its own.
type notice struct {
	Text     string       `json:"text"`
	Approval noticeDetail `json:"approval"`
}

type noticeDetail struct {
	ID        string          `json:"id"`
	URL       string          `json:"url"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Chain     []string        `json:"chain"`
	Principal string          `json:"principal"`
	Revision  string          `json:"revision"`
	Approvers string          `json:"approvers"`
	Expires   time.Time       `json:"expires"`
}

// notify POSTs p to the webhook, once, bounded by the client's timeout;
// a failure is logged (the caller's answer names the link anyway).
func (s *Service) notify(p *pending) {
	if s.o.Webhook == "" {
		return
	}
	args := string(p.Input)
	if len(args) > 500 {
		args = args[:500] + "…"
	}
	n := notice{
		Text: fmt.Sprintf("%s asks to run %s %s on %v (policy revision %s). %s. Approve or deny by %s: %s",
			p.Asker.Subject, p.Tool, args, p.Chain, p.Revision, sentence(who(p.Approvers)), p.Expires.Format(time.RFC3339), s.link(p.ID)),
		Approval: noticeDetail{ID: p.ID, URL: s.link(p.ID), Tool: p.Tool, Arguments: p.Input, Chain: p.Chain, Principal: p.Asker.Subject,
			Revision: p.Revision, Approvers: who(p.Approvers), Expires: p.Expires},
	}
	b, _ := json.Marshal(n)
	ctx, cancel := context.WithTimeout(context.Background(), s.o.Client.Timeout+time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.Webhook, bytes.NewReader(b))
	if err != nil {
		s.o.Logger.Warn("approvals: the webhook cannot be posted", "id", p.ID, "cause", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.o.Client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the URL, which holds the webhook's secret
	}
	if err != nil {
		s.o.Logger.Warn("approvals: the webhook cannot be posted; the approvers must learn of the approval another way", "id", p.ID, "cause", err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		s.o.Logger.Warn("approvals: the webhook refused the notice", "id", p.ID, "status", resp.Status)
	}
}
