package ticket

import (
	"encoding/json"
	"testing"
)

// TestP16ClaimsEncodeAsEncodingJSON: the claims a ticket carries are
// written byte for byte as encoding/json writes them (Check reads them
// with it), asked or not, and a revision of any characters (quotes,
// escapes, <, &, an emoji, U+2028) reads back as the claims it was.
func TestP16ClaimsEncodeAsEncodingJSON(t *testing.T) {
	asked := binding()
	asked.Approved, asked.Cache, asked.Tool = true, "/c", "run_shell_command"
	for _, b := range []Binding{binding(), asked, {}} {
		c := b.claims()
		c.Expires, c.Nonce = 1796310049, "uaze3sAMCbY9g_Or"
		want, _ := json.Marshal(c)
		if got := c.encode(); string(got) != string(want) {
			t.Errorf("%+v:\nencoded  %s\nwant     %s", b, got, want)
		}
	}
	for _, rev := range []string{"", `a"b\c`, "<script>&amp;", "x\u2028y\x01\t😀", "985227466cc8"} {
		b := binding()
		b.Revision = rev
		c := b.claims()
		c.Expires = -1
		var got claims
		if err := json.Unmarshal(c.encode(), &got); err != nil || got != c {
			t.Errorf("revision %q: read back as %+v (%v), want %+v", rev, got, err, c)
		}
	}
}
