package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"aimon.dev/gw/internal/runtime/gateway"
)

// ReadSession is the session that the lines of r saw (check --session,
// rule P18): in the line protocol, the user's words (a user line), calls
// (any call form) and the results of those calls (a tool_result block, or
// a user message of them, as serve answers a message), in order. A result
// labels the session as the policy of g labels it, and feeds provenance;
// one that is an error labels nothing. name names r in sentences.
func ReadSession(ctx context.Context, g *gateway.Gateway, r io.Reader, name string) (gateway.Session, error) {
	s := gateway.NewSession()
	type seen struct {
		call    gateway.Call
		surface []string
	}
	calls := map[string]seen{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxRecord)
	for line := 1; sc.Scan(); line++ {
		data := sc.Bytes()
		if len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		var m struct {
			Type, Role string
			ToolUseID  string `json:"tool_use_id"`
			Content    json.RawMessage
			IsError    bool `json:"is_error"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("%s:%d: the line is not JSON (%v); a session file holds lines of the line protocol", name, line, err)
		}
		var results []toolResult
		switch {
		case m.Type == "tool_result":
			results = []toolResult{{ID: m.ToolUseID, Content: m.Content, IsError: m.IsError}}
		case m.Role == "user":
			text, rs, err := userContent(m.Content)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, line, err)
			}
			for _, t := range text {
				gateway.NoteUser(s, t)
			}
			results = rs
		default:
			cs, surface, err := gateway.ReadCalls(data)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: the line is neither the user's words, a call nor a result (%s)", name, line, strings.TrimSuffix(err.Error(), "."))
			}
			for _, c := range cs {
				calls[c.ID] = seen{c, surface}
			}
		}
		for _, r := range results {
			c, ok := calls[r.ID]
			if !ok {
				return nil, fmt.Errorf("%s:%d: the result of call %q, which no earlier line calls; give the call's line before its result", name, line, r.ID)
			}
			text, err := resultText(r.Content)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: the result of call %q: %v", name, line, r.ID, err)
			}
			if r.IsError {
				continue
			}
			c.call.Session = s
			if _, err := g.Label(ctx, c.surface, c.call, text); err != nil {
				return nil, fmt.Errorf("%s:%d: the session's labels cannot be kept: %v", name, line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return s, nil
}

// toolResult is a tool_result block.
type toolResult struct {
	Type    string          `json:"type"`
	ID      string          `json:"tool_use_id"`
	Content json.RawMessage `json:"content"`
	IsError bool            `json:"is_error"`
}

// userContent is a user message's text and its tool_result blocks.
func userContent(raw json.RawMessage) ([]string, []toolResult, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []string{text}, nil, nil
	}
	var blocks []struct {
		toolResult
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, nil, fmt.Errorf("a user message's content must be text or an array of blocks (%v)", err)
	}
	var texts []string
	var rs []toolResult
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_result":
			rs = append(rs, b.toolResult)
		}
	}
	return texts, rs, nil
}

// resultText is a result's content: text, or an array of text blocks.
func resultText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, nil
	}
	var blocks []struct{ Type, Text string }
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("its content must be text or an array of text blocks (%v)", err)
	}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}
