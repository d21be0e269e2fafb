package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The line protocol (docs/PROTOCOL.md): what a line may hold.
// Names are matched exactly and each may be given once, at every level the
// gateway reads (rule R2): what a stricter parser upstream saw and what the
// gateway runs cannot differ. Unknown names are ignored.
type request struct {
	// One call (form 2), or the line's type.
	callFields
	Role    string
	Content []block
	// texts is a message's content given as text.
	texts []string
	// list_tools (form 3).
	Format string
	Strict bool
	// The line's own surface chain, within the process chain (rule R5).
	Surface []string
	// Approvals are the tokens a person gave for calls of this line that
	// asked (rule P15).
	Approvals []string
	// OpenAI forms (4, 5).
	ToolCalls []openaiCall
	CallID    string
	args      arguments
	Object    string
	// Output is a response object's items, read as lines are; outputErr is
	// what is wrong with them, the line's error only when Object is
	// "response" (otherwise output is not the protocol's).
	Output    []*request
	outputErr error

	hasContent, hasToolCalls bool
}

// block is a content block: a call, or text (Text, of a user message).
type block struct {
	callFields
	Text string
}

// callFields are the members of a call that a tool_use line and a content
// block share: its input as sent, as the gate read it in the line's pass,
// and why the gate could not (inputErr).
type callFields struct {
	Type     string
	ID       string
	Name     string
	Input    json.RawMessage
	decoded  map[string]any
	inputErr error
}

// openaiCall is one Chat Completions tool call.
type openaiCall struct {
	ID   string
	Type string
	Name string
	args arguments
}

// arguments are an OpenAI call's arguments, JSON in a string, when given;
// data is text's bytes, when read from a string (gate.Decoder.ReadText).
type arguments struct {
	text  string
	data  []byte
	given bool
}

// result is a tool_result block; is_error is always present.
type result struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
	// structured is the tool's structured result, for the MCP front end.
	structured any
	// approval is the token of a call that asks (rule P15), for the MCP
	// front end, which asks the person itself.
	approval string
	// retryAfter is when a call a limit refused may be retried, in
	// seconds (rule P19).
	retryAfter float64
	asked      *Asked
}

type userMessage struct {
	Role    string   `json:"role"`
	Content []result `json:"content"`
}

type errorLine struct {
	Type  string `json:"type"`
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

func errorReply(format string, args ...any) []byte {
	var e errorLine
	e.Type = "error"
	e.Error.Message = fmt.Sprintf(format, args...)
	return marshal(e)
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only values of this package are encoded here; say so rather than panic.
		return []byte(`{"type":"error","error":{"message":"the gateway could not encode its reply"}}` + "\n")
	}
	return buf.Bytes()
}

// appendResult appends r and a newline to dst as marshal would encode
// them, byte for byte (FuzzR1AppendResultIsMarshal).
func appendResult(dst []byte, r result) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, r.Type)
	dst = append(dst, `,"tool_use_id":`...)
	dst = appendString(dst, r.ToolUseID)
	dst = append(dst, `,"content":`...)
	dst = appendString(dst, r.Content)
	if r.IsError {
		return append(dst, `,"is_error":true}`+"\n"...)
	}
	return append(dst, `,"is_error":false}`+"\n"...)
}

// appendUserMessage appends the user message of rs and a newline to dst as
// marshal would encode it (FuzzR1AppendResultIsMarshal).
func appendUserMessage(dst []byte, rs []result) []byte {
	if rs == nil {
		return append(dst, marshal(userMessage{Role: "user"})...)
	}
	dst = append(dst, `{"role":"user","content":[`...)
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendResult(dst, r)
		dst = dst[:len(dst)-1] // its newline
	}
	return append(dst, "]}\n"...)
}

// appendString appends s as a JSON string, escaped inline as marshal's
// encoder escapes it (no HTML escaping): quote, backslash and control
// characters, invalid UTF-8 as \ufffd, U+2028 and U+2029.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// validIDs refuses a line whose call id decoded differently from what was
// sent (a lone surrogate becomes U+FFFD): its reply could not name it.
func validIDs(r *request) error {
	bad := strings.ContainsRune(r.ID, utf8.RuneError) || strings.ContainsRune(r.CallID, utf8.RuneError)
	for _, b := range r.Content {
		bad = bad || strings.ContainsRune(b.ID, utf8.RuneError)
	}
	for _, c := range r.ToolCalls {
		bad = bad || strings.ContainsRune(c.ID, utf8.RuneError)
	}
	if bad {
		return errors.New("a call id holds an invalid character (a lone surrogate or U+FFFD), so its reply could not name it; send ids of plain text")
	}
	return nil
}
