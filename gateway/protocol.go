package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"aimon.dev/gw/internal/gate"
)

// The line protocol (docs/PROTOCOL.md): what a line may hold.
// Names are matched exactly and each may be given once, at every level the
// gateway reads (rule R2): what a stricter parser upstream saw and what the
// gateway runs cannot differ. Unknown names are ignored.
type request struct {
	Type    string
	Role    string
	Content []block
	// One call (form 2); decoded is its input when the line was read in
	// one pass (decodeItem).
	ID      string
	Name    string
	Input   json.RawMessage
	decoded map[string]any
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
	Arguments *string
	Object    string
	Output    []json.RawMessage

	hasContent, hasToolCalls, hasOutput bool
}

type block struct {
	Type    string
	ID      string
	Name    string
	Input   json.RawMessage
	decoded map[string]any // the input, when the line was read in one pass
}

// openaiCall is one Chat Completions tool call.
type openaiCall struct {
	ID        string
	Type      string
	Name      string
	Arguments *string
}

// A call is one tool_use. Its input stays raw until gate.Decode reads it
// once, refusing what encoding/json would let through (a name given twice),
// unless the line's one pass read it already (decoded).
type call struct {
	ID        string
	Name      string
	Input     json.RawMessage
	decoded   map[string]any
	approvals []string
	principal string // who called, over HTTP
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

// appendString appends s as a JSON string, as marshal's encoder does: a
// plain string as itself, any other through encoding/json.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b := marshal(s)
			return append(dst, b[:len(b)-1]...) // without the encoder's newline
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// maxDepth is how deep a line may nest; encoding/json's own bound.
const maxDepth = 10000

// decode parses one line. Numbers stay json.Number so that 3.0 and 3 keep
// their spelling for the gate (rule S5).
func decode(line []byte) (*request, error) {
	if r, ok := decodeItem(line); ok {
		return r, nil
	}
	// Only a line that can be a message is read twice when it is not.
	if bytes.Contains(line, []byte(`"role"`)) {
		if r, ok := decodeMessage(line); ok {
			return r, nil
		}
	}
	return decodeExact(line)
}

// strs reads the named members of m that must be strings; false when one
// is of another kind, or m has a name not in names.
func strs(m map[string]any, names map[string]*string, more ...string) bool {
	for name, v := range m {
		if dst, ok := names[name]; ok {
			if *dst, ok = v.(string); !ok {
				return false
			}
		} else if !slices.Contains(more, name) {
			return false
		}
	}
	return true
}

// decodeMessage reads an assistant message in one pass: block by block
// (decodeBlocks) when it can, else with gate.ScanLine, Anthropic's
// {"role", "content"} with the inputs of its blocks, each held to the
// gate's limits by gate.Within, or Chat Completions' {"role",
// "content"?, "tool_calls"}, whose arguments are strings the gate reads
// once. Any other line, a member of another kind than decodeExact reads
// without a sentence, or an input past the limits, is left to decodeExact,
// which reads it to the same request (FuzzR2MessageIsDecode).
func decodeMessage(line []byte) (*request, bool) {
	// A Chat Completions message is never one decodeBlocks reads.
	if !bytes.Contains(line, []byte(`"tool_calls"`)) {
		if r, ok := decodeBlocks(line); ok {
			return r, true
		}
	}
	top, ok := gate.ScanLine(line)
	if !ok {
		return nil, false
	}
	var r request
	if !strs(top, map[string]*string{"role": &r.Role}, "content", "tool_calls") || r.Role == "" {
		return nil, false
	}
	content, hasContent := top["content"]
	calls, hasCalls := top["tool_calls"]
	r.hasContent, r.hasToolCalls = hasContent, hasCalls
	switch c := content.(type) {
	case nil:
		if hasContent {
			r.Content = []block{} // null, as encoding/json reads it into a slice
		}
	case string:
		r.Content = []block{}
	case []any:
		if hasCalls {
			return nil, false
		}
		if r.Content, ok = contentBlocks(c); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	if hasCalls {
		items, ok := calls.([]any)
		if !ok {
			return nil, false
		}
		if r.ToolCalls, ok = chatCalls(items); !ok {
			return nil, false
		}
	}
	if validIDs(&r) != nil {
		return nil, false
	}
	return &r, true
}

// lineNames are the members of a line that decodeExact reads; it ignores
// any other.
var lineNames = []string{"type", "role", "id", "name", "format", "call_id", "object", "input", "strict", "arguments", "surface", "content", "tool_calls", "output", "approvals"}

// blockNames are the members of a content block that blocks reads.
var blockNames = []string{"type", "id", "name", "input"}

// decodeBlocks reads the most common message, Anthropic's {"role",
// "content"} whose blocks are strings but for their input, with
// gate.Envelopes: each input is decoded as the gate decodes it on its own.
// A Messages API response reads so too: its members of other kinds
// (usage, stop_sequence) are ones decodeExact ignores.
func decodeBlocks(line []byte) (*request, bool) {
	var r request
	bs := []block{}
	ins, ok := gate.Envelopes(line, "content", "input", gate.DefaultLimits, func(item int, name, v string) bool {
		if item < 0 {
			switch name {
			case "role":
				r.Role = v
			case "type":
				r.Type = v
			case "id":
				r.ID = v
			case "name":
				r.Name = v
			case "format":
				r.Format = v
			case "call_id":
				r.CallID = v
			case "object":
				r.Object = v
			default:
				return !slices.Contains(lineNames, name)
			}
			return true
		}
		for len(bs) <= item {
			bs = append(bs, block{})
		}
		switch name {
		case "type":
			bs[item].Type = v
		case "id":
			bs[item].ID = v
		case "name":
			bs[item].Name = v
		}
		return true // blocks ignores the other members
	}, func(item int, name string) bool {
		if item < 0 {
			return !slices.Contains(lineNames, name)
		}
		return !slices.Contains(blockNames, name)
	})
	if !ok || r.Role == "" {
		return nil, false
	}
	for len(bs) < len(ins) {
		bs = append(bs, block{})
	}
	for i, in := range ins {
		bs[i].decoded = in
	}
	r.Content, r.hasContent = bs, true
	if validIDs(&r) != nil {
		return nil, false
	}
	out := r // r stays on the stack for the lines this does not read
	return &out, true
}

// contentBlocks reads an Anthropic content array, as blocks does.
func contentBlocks(items []any) ([]block, bool) {
	out := make([]block, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		var b block
		for name, dst := range map[string]*string{"type": &b.Type, "id": &b.ID, "name": &b.Name} {
			if v, present := m[name]; present {
				if *dst, ok = v.(string); !ok {
					return nil, false
				}
			}
		}
		if v, present := m["input"]; present {
			in, ok := v.(map[string]any)
			if !ok || !gate.Within(in, gate.DefaultLimits) {
				return nil, false
			}
			b.decoded = in
		}
		out = append(out, b)
	}
	return out, true
}

// chatCalls reads a Chat Completions tool_calls array, as toolCalls does.
func chatCalls(items []any) ([]openaiCall, bool) {
	out := make([]openaiCall, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		var c openaiCall
		if !strs(m, map[string]*string{"id": &c.ID, "type": &c.Type}, "function") {
			return nil, false
		}
		if fv, present := m["function"]; present {
			fn, ok := fv.(map[string]any)
			var args string
			if !ok || !strs(fn, map[string]*string{"name": &c.Name, "arguments": &args}) {
				return nil, false
			}
			if _, present := fn["arguments"]; present {
				c.Arguments = &args
			}
		}
		out = append(out, c)
	}
	return out, true
}

// decodeItem reads the most common lines, one tool_use block with its input
// or one Responses function_call item, in one pass (gate.Envelope). Any
// other line, or one that pass does not read, is left to decodeExact,
// which reads it to the same request (FuzzR2ItemIsDecode).
func decodeItem(line []byte) (*request, bool) {
	var r request
	in, raw, ok := gate.Envelope(line, "input", gate.DefaultLimits, func(name, v string) bool {
		switch name {
		case "type":
			r.Type = v
		case "id":
			r.ID = v
		case "name":
			r.Name = v
		case "call_id":
			r.CallID = v
		case "arguments":
			a := v
			r.Arguments = &a
		case "status":
			// A Responses item's; the exact reading ignores it too.
		default:
			return false
		}
		return true
	})
	if !ok || validIDs(&r) != nil {
		return nil, false
	}
	r.Input, r.decoded = raw, in
	return &r, true
}

// decodeExact reads any line, with a sentence for what is wrong. The
// members it reads are lineNames.
func decodeExact(line []byte) (*request, error) {
	if !utf8.Valid(line) {
		return nil, errors.New("the line is not valid UTF-8; send JSON text in UTF-8")
	}
	if r, _ := utf8.DecodeRune(bytes.TrimLeft(line, " \t\r\n")); r >= utf8.RuneSelf && unicode.IsSpace(r) || r < ' ' && r != 0 {
		return nil, fmt.Errorf("the line holds %U, which is neither JSON white space nor JSON; send one JSON object per line", r)
	}
	top, err := members(line, "the line")
	if err != nil {
		return nil, err
	}
	var r request
	strs := map[string]*string{"type": &r.Type, "role": &r.Role, "id": &r.ID, "name": &r.Name, "format": &r.Format, "call_id": &r.CallID, "object": &r.Object}
	for name, dst := range strs {
		if raw, ok := top[name]; ok {
			if *dst, err = stringField(raw, name); err != nil {
				return nil, err
			}
		}
	}
	if raw, ok := top["input"]; ok {
		r.Input = raw
	}
	if raw, ok := top["strict"]; ok {
		if err := json.Unmarshal(raw, &r.Strict); err != nil {
			return nil, fmt.Errorf("field \"strict\" must be true or false")
		}
	}
	if raw, ok := top["arguments"]; ok {
		a, err := stringField(raw, "arguments")
		if err != nil {
			return nil, err
		}
		r.Arguments = &a
	}
	if raw, ok := top["surface"]; ok {
		if err := json.Unmarshal(raw, &r.Surface); err != nil || r.Surface == nil && string(raw) != "null" {
			return nil, errors.New("field \"surface\" must be an array of strings such as [\"agent\", \"subagent:reviewer\"]")
		}
		if r.Surface == nil {
			r.Surface = nil // null: the line gives none
		}
	}
	if raw, ok := top["approvals"]; ok {
		if err := json.Unmarshal(raw, &r.Approvals); err != nil {
			return nil, errors.New("field \"approvals\" must be an array of the approval tokens a person gave, as strings")
		}
	}
	if raw, ok := top["content"]; ok {
		r.hasContent = true
		if r.Content, err = blocks(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["tool_calls"]; ok {
		r.hasToolCalls = true
		if r.ToolCalls, err = toolCalls(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["output"]; ok && r.Object == "response" {
		r.hasOutput = true
		if err := json.Unmarshal(raw, &r.Output); err != nil {
			return nil, errors.New("field \"output\" of a response must be an array of items")
		}
	}
	if err := validIDs(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// members reads a JSON object's members exactly as named (a map's keys
// are not case-folded), refusing a name given twice: encoding/json would
// keep the last one silently.
func members(data []byte, what string) (map[string]json.RawMessage, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		switch {
		case t[0] == '[':
			return nil, notObject(what, "array")
		case t[0] == '"':
			return nil, notObject(what, "string")
		case t[0] == '-' || t[0] >= '0' && t[0] <= '9':
			return nil, notObject(what, "number")
		case bytes.HasPrefix(t, []byte("true")) || bytes.HasPrefix(t, []byte("false")):
			return nil, notObject(what, "bool")
		case bytes.HasPrefix(t, []byte("null")):
			return nil, notObject(what, "null")
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return nil, notObject(what, te.Value)
		}
		return nil, decodeError(err, what)
	}
	if m == nil {
		return nil, notObject(what, "null")
	}
	if dup, ok := duplicateName(data, len(m)); ok {
		return nil, fmt.Errorf("%s gives the name %q twice; give each field once", what, dup)
	}
	return m, nil
}

// notObject is the error of a value that is not an object; value is as
// encoding/json names it ("array", "number", "null").
func notObject(what, value string) error {
	article := "a JSON "
	switch value {
	case "null":
		article = "JSON "
	case "array", "object":
	case "bool":
		value = "boolean"
	}
	if what != "the line" {
		return fmt.Errorf("%s is %s%s, not an object", what, article, value)
	}
	return fmt.Errorf("%s is %s%s, not an object; send one JSON object per line", what, article, value)
}

// duplicateName returns a name the top-level object of valid JSON data
// gives more than once. It is called only when data decoded to n distinct
// names, and scans no further than it must: when the object has n members,
// none repeats.
func duplicateName(data []byte, n int) (string, bool) {
	count := 0
	topKeys(data, func([]byte) bool { count++; return true })
	if count == n {
		return "", false
	}
	seen := make(map[string]bool, count)
	dup, found := "", false
	topKeys(data, func(raw []byte) bool {
		k := unquoteKey(raw)
		if seen[k] {
			dup, found = k, true
			return false
		}
		seen[k] = true
		return true
	})
	return dup, found
}

// topKeys calls f with the raw (quoted) names of the top-level object of
// valid JSON data, in order, until f returns false.
func topKeys(data []byte, f func(raw []byte) bool) {
	depth, expectKey := 0, false
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if depth == 1 && expectKey {
				if !f(data[i : j+1]) {
					return
				}
				expectKey = false
			}
			i = j
		case '{':
			depth++
			expectKey = depth == 1
		case '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		}
	}
}

// unquoteKey is a quoted JSON name as a string.
func unquoteKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// describe names a JSON token's kind for a sentence: "a JSON array".
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "a JSON array"
		}
		return "a JSON object"
	case string:
		return "a JSON string"
	case json.Number, float64:
		return "a JSON number"
	case bool:
		return "a JSON boolean"
	case nil:
		return "JSON null"
	}
	return "a JSON value"
}

// stringField reads a member that must be a JSON string.
func stringField(raw json.RawMessage, name string) (string, error) {
	// Most names and ids are plain: no escape, nothing but printable ASCII.
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && plainASCII(raw[1:n-1]) {
		return string(raw[1 : n-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		tok, _ := json.NewDecoder(bytes.NewReader(raw)).Token()
		return "", fmt.Errorf("field %q must be a string, not %s; see the protocol's line forms", name, describe(tok))
	}
	return s, nil
}

// plainASCII reports bytes that a JSON string holds as themselves.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// blocks reads an assistant message's content: an array of blocks, each
// read as strictly as the line; a plain-text content holds none.
func blocks(raw json.RawMessage) ([]block, error) {
	if len(raw) > 0 && raw[0] == '"' {
		return []block{}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		if string(raw) == "null" {
			return nil, nil
		}
		return nil, errors.New("field \"content\" must be an array of content blocks, or text")
	}
	out := make([]block, 0, len(items))
	for i, it := range items {
		m, err := members(it, fmt.Sprintf("content block %d", i))
		if err != nil {
			return nil, err
		}
		var b block
		for name, dst := range map[string]*string{"type": &b.Type, "id": &b.ID, "name": &b.Name} {
			if raw, ok := m[name]; ok {
				if *dst, err = stringField(raw, name); err != nil {
					return nil, err
				}
			}
		}
		b.Input = m["input"]
		out = append(out, b)
	}
	return out, nil
}

// toolCalls reads a Chat Completions message's tool_calls.
func toolCalls(raw json.RawMessage) ([]openaiCall, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		if string(raw) == "null" {
			return nil, nil
		}
		return nil, errors.New("field \"tool_calls\" must be an array of tool calls")
	}
	out := make([]openaiCall, 0, len(items))
	for i, it := range items {
		what := fmt.Sprintf("tool call %d", i)
		m, err := members(it, what)
		if err != nil {
			return nil, err
		}
		var c openaiCall
		for name, dst := range map[string]*string{"id": &c.ID, "type": &c.Type} {
			if raw, ok := m[name]; ok {
				if *dst, err = stringField(raw, name); err != nil {
					return nil, err
				}
			}
		}
		if fn, ok := m["function"]; ok {
			f, err := members(fn, what+"'s function")
			if err != nil {
				return nil, err
			}
			if raw, ok := f["name"]; ok {
				if c.Name, err = stringField(raw, "name"); err != nil {
					return nil, err
				}
			}
			if raw, ok := f["arguments"]; ok {
				a, err := stringField(raw, "arguments")
				if err != nil {
					return nil, err
				}
				c.Arguments = &a
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// validIDs refuses a line whose call id decoded differently from what was
// sent (a lone surrogate becomes U+FFFD): its reply could not name it.
func validIDs(r *request) error {
	ids := []string{r.ID, r.CallID}
	for _, b := range r.Content {
		ids = append(ids, b.ID)
	}
	for _, c := range r.ToolCalls {
		ids = append(ids, c.ID)
	}
	for _, id := range ids {
		if strings.ContainsRune(id, utf8.RuneError) {
			return errors.New("a call id holds an invalid character (a lone surrogate or U+FFFD), so its reply could not name it; send ids of plain text")
		}
	}
	return nil
}

func decodeError(err error, what string) error {
	var se *json.SyntaxError
	switch {
	case strings.Contains(err.Error(), "after top-level value"):
		return fmt.Errorf("%s holds more than one JSON value; send one JSON object per line", what)
	case strings.Contains(err.Error(), "exceeded max depth"):
		return fmt.Errorf("%s is nested deeper than %d levels; send a flatter input", what, maxDepth)
	case errors.As(err, &se):
		return fmt.Errorf("%s is not valid JSON (%s at byte %d); send one JSON object per line", what, se.Error(), se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s is not valid JSON (it ends early); send one JSON object per line", what)
	}
	return fmt.Errorf("%s is not valid JSON: %v", what, err)
}
