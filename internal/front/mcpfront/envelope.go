package mcpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// envelope is a frame read once: the message for the SDK, and the id as
// sent, for an answer of the guard's own.
type envelope struct {
	msg jsonrpc.Message
	id  json.RawMessage
}

// problem is the guard's answer to a frame the SDK must not see.
type problem struct {
	id      json.RawMessage // nil: answered with id null
	code    int
	message string
}

// response is the problem as the JSON-RPC error response that answers it.
func (p *problem) response() []byte {
	id := p.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": p.code, "message": p.message}})
	return b
}

// Frame is what ReadFrame reads of a request or response.
type Frame struct {
	Method string          // "" for a response
	ID     json.RawMessage // as sent; nil for a notification
	Params json.RawMessage
	// RequestID is a request's id as the SDK reads it; invalid for a
	// notification.
	RequestID jsonrpc.ID
}

// ReadFrame is the one reading of an MCP frame that every transport uses
// (stdio's guard, the HTTP front): the frame, or, for one the SDK must
// not see, the JSON-RPC error response to send instead, under the
// request's own id where the frame has one.
func ReadFrame(data []byte) (Frame, []byte) {
	env, p := readEnvelope(data)
	if p != nil {
		return Frame{ID: p.id}, p.response()
	}
	f := Frame{ID: env.id}
	if req, ok := env.msg.(*jsonrpc.Request); ok {
		f.Method, f.Params, f.RequestID = req.Method, req.Params, req.ID
	}
	return f, nil
}

// reader is a pooled decoder with the reader of its frame.
type reader struct {
	r bytes.Reader
	d *jsontext.Decoder
}

var readers = sync.Pool{New: func() any {
	rd := &reader{}
	rd.d = jsontext.NewDecoder(&rd.r)
	return rd
}}

// decoder is a pooled decoder of data; put it back with readers.Put.
func decoder(data []byte) (*reader, *jsontext.Decoder) {
	rd := readers.Get().(*reader)
	rd.r.Reset(data)
	rd.d.Reset(&rd.r)
	return rd, rd.d
}

// readEnvelope reads a frame in one pass of jsontext (valid UTF-8, each
// name once, names matched exactly as the SDK matches them) into the
// JSON-RPC message the SDK's DecodeMessage would make of it, or the
// problem to answer: -32700 for what is not JSON, -32600 for what is not
// one request or response, or whose id the SDK would misread (idProblem).
func readEnvelope(data []byte) (envelope, *problem) {
	rd, d := decoder(data)
	defer readers.Put(rd)
	top := d.PeekKind()
	var members map[string]json.RawMessage
	if top == '{' {
		members = map[string]json.RawMessage{}
	}
	if err := readTop(d, data, members); err != nil {
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && se.Err == jsontext.ErrDuplicateName {
			return envelope{}, &problem{id: soleID(data), code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("the frame gives the name %q twice; give each member once", se.JSONPointer.LastToken())}
		}
		return envelope{}, &problem{code: jsonrpc.CodeParseError, message: "the frame is not valid JSON; send one JSON-RPC message per line"}
	}
	switch top {
	case '{':
	case '[':
		return envelope{}, &problem{code: jsonrpc.CodeInvalidRequest, message: "batch requests are not supported; send one JSON-RPC message per line"}
	default:
		return envelope{}, &problem{code: jsonrpc.CodeInvalidRequest, message: "the frame is not a JSON-RPC request object"}
	}
	rawID, hasMethod := members["id"], members["method"] != nil
	if v, ok := unquote(members["jsonrpc"]); !ok || v != "2.0" {
		return envelope{}, &problem{id: rawID, code: jsonrpc.CodeInvalidRequest, message: `the message lacks "jsonrpc": "2.0"`}
	}
	id, msg := readID(rawID, hasMethod)
	if msg != "" {
		return envelope{}, &problem{code: jsonrpc.CodeInvalidRequest, message: msg}
	}
	const invalid = "the message is not a valid JSON-RPC request or response; send an object with \"jsonrpc\": \"2.0\", a \"method\" and, for a request, an \"id\""
	if hasMethod {
		method, ok := unquote(members["method"])
		if !ok {
			return envelope{}, &problem{id: rawID, code: jsonrpc.CodeInvalidRequest, message: invalid}
		}
		return envelope{msg: &jsonrpc.Request{ID: id, Method: method, Params: members["params"]}, id: rawID}, nil
	}
	if !id.IsValid() {
		return envelope{}, &problem{id: rawID, code: jsonrpc.CodeInvalidRequest, message: invalid}
	}
	if members["result"] == nil && members["error"] == nil {
		// Neither a request nor a response: answered, not dropped as a
		// response to no request.
		return envelope{}, &problem{id: rawID, code: jsonrpc.CodeInvalidRequest, message: invalid}
	}
	resp := &jsonrpc.Response{ID: id, Result: members["result"]}
	if raw := members["error"]; raw != nil && string(raw) != "null" {
		// A response of the client (to an elicitation) that is an error:
		// its object is read again, as the SDK would read it.
		var we jsonrpc.Error
		if json.Unmarshal(raw, &we) != nil {
			return envelope{}, &problem{id: rawID, code: jsonrpc.CodeInvalidRequest, message: invalid}
		}
		resp.Error = &we
	}
	return envelope{msg: resp, id: rawID}, nil
}

// readTop reads the one value of data; an object's members go into
// members, each as the bytes of its value.
func readTop(d *jsontext.Decoder, data []byte, members map[string]json.RawMessage) error {
	if members == nil {
		if err := d.SkipValue(); err != nil {
			return err
		}
		return atEnd(d)
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		quoted, err := d.ReadValue() // a name: its bytes, checked
		if err != nil {
			return err
		}
		name, _ := unquote(json.RawMessage(quoted))
		start := d.InputOffset()
		if err := d.SkipValue(); err != nil {
			return err
		}
		switch name {
		case "jsonrpc", "id", "method", "params", "result", "error":
			members[name] = bytes.TrimLeft(data[start:d.InputOffset()], " \t\r\n:")
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	return atEnd(d)
}

// soleID is the id of a frame refused for a name given twice, so that the
// refusal reaches the request it answers: the top-level "id" when it is
// given once and is one the SDK reads as sent, else nil (id null).
func soleID(data []byte) json.RawMessage {
	d := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	var id json.RawMessage
	for n := 0; d.PeekKind() == '"'; {
		tok, err := d.ReadToken()
		if err != nil {
			return nil
		}
		name := tok.String() // before the next read voids tok
		v, err := d.ReadValue()
		if err != nil {
			return nil
		}
		if name == "id" {
			if n++; n > 1 {
				return nil
			}
			id = append(json.RawMessage(nil), v...)
		}
	}
	if _, err := d.ReadToken(); err != nil || atEnd(d) != nil {
		return nil // not JSON after all: no id to trust
	}
	if _, msg := readID(id, true); msg != "" {
		return nil
	}
	return id
}

// atEnd refuses data after the frame's value.
func atEnd(d *jsontext.Decoder) error {
	if _, err := d.ReadToken(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

// unquote is the string a JSON string value holds; false for any other.
func unquote(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	return string(b), err == nil
}

// readID reads a request id as the SDK would, or says why it cannot: the
// SDK reads a null id as a notification's (no answer at all), a fraction
// as its integer part and a large integer through a float, so each would
// be answered under another id or not at all.
func readID(raw json.RawMessage, request bool) (jsonrpc.ID, string) {
	const advice = "give each request a string or an integer id (a notification has no id at all)"
	switch {
	case raw == nil:
		return jsonrpc.ID{}, ""
	case string(raw) == "null":
		if !request {
			return jsonrpc.ID{}, "" // a response to a request the client could not read
		}
		return jsonrpc.ID{}, `the request's "id" is null; ` + advice
	case raw[0] == '"':
		s, _ := unquote(raw)
		id, _ := jsonrpc.MakeID(s)
		return id, ""
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > 1<<53 || n < -(1<<53) {
			return jsonrpc.ID{}, fmt.Sprintf("the id %s is not an integer within ±2^53 (what a JSON number keeps exactly); %s", raw, advice)
		}
		id, _ := jsonrpc.MakeID(float64(n))
		return id, ""
	}
	return jsonrpc.ID{}, fmt.Sprintf("the id %s is neither a string nor an integer; %s", raw, advice)
}

// cancelledKey is the key (keyOf) of the request a notifications/cancelled
// names in its params.
func cancelledKey(params json.RawMessage) (string, bool) {
	rd, d := decoder(params)
	defer readers.Put(rd)
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", false
	}
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return "", false
		}
		if name.String() != "requestId" {
			if d.SkipValue() != nil {
				return "", false
			}
			continue
		}
		v, err := d.ReadToken()
		if err != nil {
			return "", false
		}
		switch v.Kind() {
		case '"':
			return keyOf(v.String()), true
		case '0':
			f, err := v.Float()
			return keyOf(int64(f)), err == nil
		}
		return "", false
	}
	return "", false
}
