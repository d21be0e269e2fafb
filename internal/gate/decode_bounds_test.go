package gate

import (
	"strings"
	"testing"
)

// TestS4DecodedSizeIsBounded: an input of many small values within the line
// limit is refused by count, before it is all held in memory (issue 11).
func TestS4DecodedSizeIsBounded(t *testing.T) {
	lim := DefaultLimits
	lim.MaxValues = 1000
	tests := []struct {
		note string
		in   string
		ok   bool
	}{
		{"at the bound", `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", 998), ",") + `]}`, true},
		{"one past", `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + `]}`, false},
		{"nested arrays count too", `{"a":[` + strings.TrimSuffix(strings.Repeat("[1,2],", 400), ",") + `]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			_, err := Decode([]byte(tc.in), lim)
			if (err == nil) != tc.ok {
				t.Fatalf("Decode = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "more than 1000 values") {
				t.Errorf("error %q does not say the bound", err)
			}
		})
	}
}
