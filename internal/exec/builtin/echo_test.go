package builtin

import (
	"context"
	"strings"
	"testing"

	"aimon.dev/gw/tools"
)

func TestEcho(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		isErr bool
		want  string
	}{
		{name: "once by default", in: `{"message":"hi"}`, want: "hi"},
		{name: "times", in: `{"message":"ab","times":3}`, want: "ababab"},
		{name: "times one", in: `{"message":"x","times":1}`, want: "x"},
		{name: "times zero", in: `{"message":"x","times":0}`, want: ""},
		{name: "integral float", in: `{"message":"x","times":2.0}`, want: "xx"},
		{name: "coerced string", in: `{"message":"x","times":"2"}`, want: "xx"},
		{name: "empty message many times", in: `{"message":"","times":1000000000}`, want: ""},
		{name: "unicode", in: `{"message":"한","times":2}`, want: "한한"},
		{name: "negative", in: `{"message":"x","times":-1}`, isErr: true, want: "Parameter 'times' must be 0 or more, got -1."},
		{name: "too long", in: `{"message":"xy","times":1000000}`, isErr: true, want: "Parameter 'times' 1000000 would make the reply longer than 1048576 bytes; use a smaller number."},
		{name: "fractional", in: `{"message":"x","times":1.5}`, isErr: true, want: "Parameter 'times' must be an integer, got number 1.5. The tool was not executed."},
		{name: "missing message", in: `{"times":2}`, isErr: true, want: "Missing required parameter 'message'. The tool was not executed."},
		{name: "null message", in: `{"message":null}`, isErr: true, want: "Missing required parameter 'message'. The tool was not executed."},
		{name: "message not a string", in: `{"message":{"a":1}}`, isErr: true, want: "Parameter 'message' must be a string, got an object. The tool was not executed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Echo{}.Run(context.Background(), nil, input(t, tt.in))
			if r.IsError != tt.isErr || r.Text != tt.want {
				t.Errorf("got (%q, error %v), want (%q, error %v)", r.Text, r.IsError, tt.want, tt.isErr)
			}
		})
	}
}

// TestS10EchoReadsItsInputAsBind: where Echo reads its input without
// Bind (echoArgs, issue 49), it reads what Bind reads, and it leaves to
// Bind every input it does not read that way, so that a bad one gets
// Bind's sentence: a string times (coerced, S11), a fraction, a number
// past int64, a message of another type, none at all.
func TestS10EchoReadsItsInputAsBind(t *testing.T) {
	for _, js := range []string{
		`{"message":"hi"}`, `{"message":"hi","times":null}`, `{"message":"ab","times":3}`, `{"message":"","times":0}`,
		`{"message":"x","times":-7}`, `{"message":"x","times":9223372036854775807}`, `{"message":"x","times":-9223372036854775808}`,
		`{"message":"x","times":1000000}`, `{"message":"x","extra":true,"times":2}`,
		`{"message":"x","times":9223372036854775808}`, `{"message":"x","times":2.0}`, `{"message":"x","times":1.5}`,
		`{"message":"x","times":1e2}`, `{"message":"x","times":"2"}`, `{"message":"x","times":true}`,
		`{"message":1}`, `{"message":null,"times":2}`, `{}`,
	} {
		in := input(t, js)
		var p EchoInput
		vs := tools.Bind(in, &p)
		msg, times, given, ok := echoArgs(in)
		if !ok {
			if js == `{"message":"hi"}` || js == `{"message":"ab","times":3}` {
				t.Errorf("%s: the usual input must be read without Bind", js)
			}
			continue
		}
		switch {
		case len(vs) > 0:
			t.Errorf("%s: read as (%q, %d), but Bind refuses it: %v", js, msg, times, vs)
		case msg != p.Message || given != (p.Times != nil) || given && times != *p.Times || !given && times != 1:
			t.Errorf("%s: read as (%q, %d, given %v), Bind as %+v", js, msg, times, given, p)
		}
		if r := (Echo{}).Run(context.Background(), nil, in); r.IsError && !strings.Contains(r.Text, "times") {
			t.Errorf("%s: %s", js, r.Text)
		}
	}
}
