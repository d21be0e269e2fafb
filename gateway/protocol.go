package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The line protocol (../shared/spec/PROTOCOL.md): what a line may hold.
type request struct {
	Type    string  `json:"type"`
	Role    string  `json:"role"`
	Content content `json:"content"`
	// One call (form 2).
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// list_tools (form 3).
	Format string `json:"format"`
	// The line's own surface chain, overriding the process default.
	Surface []string `json:"surface"`

	hasContent bool
}

// content is an assistant message's blocks; a plain-text content holds none.
type content []block

func (c *content) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		*c = content{}
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(data, &blocks); err != nil {
		return err
	}
	if blocks == nil {
		blocks = []block{}
	}
	*c = blocks
	return nil
}

type block struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// A call is one tool_use. Its input stays raw until gate.Decode reads it
// once, refusing what encoding/json would let through (a name given twice).
type call struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// result is a tool_result block; is_error is always present.
type result struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
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

// decode parses one line. Numbers stay json.Number so that 3.0 and 3 keep
// their spelling for the gate (rule S5).
func decode(line []byte) (*request, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var r request
	if err := dec.Decode(&r); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the line holds more than one JSON value; send one JSON object per line")
	}
	r.hasContent = r.Content != nil
	return &r, nil
}

func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("the line is not valid JSON (%s at byte %d); send one JSON object per line", se.Error(), se.Offset)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return fmt.Errorf("the line is a JSON %s, not an object; send one JSON object per line", te.Value)
		}
		return fmt.Errorf("field %q must not be a JSON %s; see the protocol's line forms", strings.TrimPrefix(field, "."), te.Value)
	}
	return fmt.Errorf("the line is not valid JSON: %v", err)
}
