package builtin

import (
	"context"
	"testing"
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
