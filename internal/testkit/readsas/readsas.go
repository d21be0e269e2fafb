// Package readsas checks a reader written token by token against json
// v2's reflection on the same inputs (the hook inputs' readers, issues
// 42 and 43): what json v2 reads into T the reader reads alike, and what
// json v2 refuses the reader refuses.
package readsas

import (
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// JSONv2 reports each input read differently from json v2's Unmarshal
// into a T, or accepted or refused where json v2 does otherwise.
func JSONv2[T any](t *testing.T, read func([]byte) (T, error), inputs ...string) {
	t.Helper()
	for _, s := range inputs {
		var want T
		wantErr := jsonv2.Unmarshal([]byte(s), &want)
		got, err := read([]byte(s))
		switch {
		case wantErr != nil && err == nil:
			t.Errorf("%s: read as %+v; json v2 refuses it: %v", s, got, wantErr)
		case wantErr == nil && err != nil:
			t.Errorf("%s: refused (%v); json v2 reads it as %+v", s, err, want)
		case wantErr == nil && !reflect.DeepEqual(got, want):
			t.Errorf("%s:\nread as  %#v\njson v2: %#v", s, got, want)
		}
	}
}
