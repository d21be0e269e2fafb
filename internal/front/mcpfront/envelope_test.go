package mcpfront

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestR2FrameReadOnce: the guard's one reading of a frame answers what the
// SDK must not see with the JSON-RPC code and a sentence, and makes of the
// rest the message the SDK would.
func TestR2FrameReadOnce(t *testing.T) {
	for _, tc := range []struct {
		note, frame string
		code        int    // 0: handed to the SDK
		want        string // in the sentence, or the method or id read
	}{
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0, "tools/list"},
		{"an escaped method is the method", `{"jsonrpc":"2.0","id":1,"method":"tools\/c\u0061ll","params":{}}`, 0, "tools/call"},
		{"an escaped string id is the id", `{"jsonrpc":"2.0","id":"\u0032","method":"ping"}`, 0, `"2"`},
		{"names of another case are not the protocol's", `{"JSONRPC":"2.0","id":1,"method":"ping"}`, jsonrpc.CodeInvalidRequest, `lacks "jsonrpc": "2.0"`},
		{"a name given twice at the top", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}`, jsonrpc.CodeInvalidRequest, `gives the name "method" twice`},
		{"a name given twice in the arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"m":1,"m":2}}}`, jsonrpc.CodeInvalidRequest, `gives the name "m" twice`},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}", jsonrpc.CodeParseError, "not valid JSON"},
		{"deeper than 10000 levels", `{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, jsonrpc.CodeParseError, "not valid JSON"},
		{"data after the object", `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, jsonrpc.CodeParseError, "not valid JSON"},
		{"a method that is not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, jsonrpc.CodeInvalidRequest, "not a valid JSON-RPC request"},
		{"a response without an id", `{"jsonrpc":"2.0","result":{}}`, jsonrpc.CodeInvalidRequest, "not a valid JSON-RPC request"},
		{"a response", `{"jsonrpc":"2.0","id":"e1","result":{"action":"accept"}}`, 0, `"e1"`},
		{"an error response", `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`, 0, "3"},
		{"a fraction id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, jsonrpc.CodeInvalidRequest, "not an integer within"},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, jsonrpc.CodeInvalidRequest, "batch requests are not supported"},
		{"a number", `42`, jsonrpc.CodeInvalidRequest, "not a JSON-RPC request object"},
		{"not JSON", `{"jsonrpc":`, jsonrpc.CodeParseError, "not valid JSON"},
	} {
		env, p := readEnvelope([]byte(tc.frame))
		if tc.code != 0 {
			if p == nil || p.code != tc.code || !strings.Contains(p.message, tc.want) {
				t.Errorf("%s: got %+v, want code %d and %q", tc.note, p, tc.code, tc.want)
			}
			continue
		}
		if p != nil {
			t.Errorf("%s: refused: %+v", tc.note, p)
			continue
		}
		var got string
		switch m := env.msg.(type) {
		case *jsonrpc.Request:
			got = m.Method
			if strings.HasPrefix(tc.want, `"`) {
				got = keyOf(m.ID.Raw())
			}
		case *jsonrpc.Response:
			got = keyOf(m.ID.Raw())
		}
		if got != tc.want {
			t.Errorf("%s: read %q, want %q", tc.note, got, tc.want)
		}
	}
}

// TestR2DuplicateNameRefusalKeepsItsID: a frame refused for a name given
// twice is answered under its own id when the id is given once and is one
// the SDK reads as sent, so the request gets its answer; else id null.
func TestR2DuplicateNameRefusalKeepsItsID(t *testing.T) {
	for _, tc := range []struct{ note, frame, id string }{
		{"twice in the params, id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Echo","name":"Read"}}`, "7"},
		{"twice in the arguments, id last", `{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"m":1,"m":2}},"id":"x"}`, `"x"`},
		{"the id twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, ""},
		{"an id the SDK would misread", `{"jsonrpc":"2.0","id":1.5,"method":"ping","method":"x"}`, ""},
		{"broken after the name", `{"jsonrpc":"2.0","id":3,"method":"a","method":"b",`, ""},
	} {
		_, p := readEnvelope([]byte(tc.frame))
		if p == nil || p.code != jsonrpc.CodeInvalidRequest && tc.id != "" || string(p.id) != tc.id {
			t.Errorf("%s: %+v; want -32600 under id %q", tc.note, p, tc.id)
		}
	}
}

// TestR2CancelledKeyIsTheIDsKey: the request a cancellation names is keyed
// as the request's own id is, however it is spelt.
func TestR2CancelledKeyIsTheIDsKey(t *testing.T) {
	for _, tc := range []struct{ note, params, want string }{
		{"a string", `{"requestId":"slow","reason":"x"}`, `"slow"`},
		{"an escaped string", `{"reason":"x","requestId":"\u0073low"}`, `"slow"`},
		{"an integer", `{"requestId":7}`, "7"},
	} {
		if got, ok := cancelledKey(json.RawMessage(tc.params)); !ok || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.note, got, ok, tc.want)
		}
	}
	for _, bad := range []string{`{}`, `{"requestId":null}`, `[1]`, `{"requestId":`} {
		if got, ok := cancelledKey(json.RawMessage(bad)); ok {
			t.Errorf("params %s named %q", bad, got)
		}
	}
}

// FuzzR2EnvelopeIsTheSDKs: a frame the guard hands over is the message the
// SDK's own DecodeMessage makes of it.
func FuzzR2EnvelopeIsTheSDKs(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"Echo","arguments":{"message":"\u00e9"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"x":[1,2]}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"no","data":{}}}`,
		`{"jsonrpc":"2.0","id":-9007199254740992,"method":"x","params":null}`,
		` {"jsonrpc" : "2.0" , "id" : "b" , "method" : "" } `,
		`{"jsonrpc":"2.0","params":{"name":"a","name":"b"},"id":"c","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		env, p := readEnvelope(frame)
		if p != nil {
			return
		}
		want, err := jsonrpc.DecodeMessage(frame)
		if err != nil {
			t.Fatalf("the guard hands over %q, which the SDK refuses: %v", frame, err)
		}
		got, _ := jsonrpc.EncodeMessage(env.msg)
		exp, _ := jsonrpc.EncodeMessage(want)
		var g, e any
		json.Unmarshal(got, &g)
		json.Unmarshal(exp, &e)
		if !reflect.DeepEqual(g, e) {
			t.Fatalf("frame %q:\n guard %s\n sdk   %s", frame, got, exp)
		}
	})
}
