package tools

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

type bindInput struct {
	Path   string   `json:"file_path"`
	Limit  *int     `json:"limit"`
	Ratio  *float64 `json:"ratio"`
	All    *bool    `json:"replace_all"`
	Tags   []string `json:"tags"`
	Nested *struct {
		Name string `json:"name"`
	} `json:"nested"`
}

func TestBind(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want []string // sentences
		ok   func(b bindInput) bool
	}{
		{"all fields", Input{"file_path": "/a", "limit": json.Number("3"), "ratio": json.Number("0.5"), "replace_all": true, "tags": []any{"x"}, "nested": map[string]any{"name": "n"}}, nil,
			func(b bindInput) bool {
				return b.Path == "/a" && *b.Limit == 3 && *b.Ratio == 0.5 && *b.All && b.Tags[0] == "x" && b.Nested.Name == "n"
			}},
		{"S5 integral float is an integer", Input{"file_path": "/a", "limit": json.Number("3.0")}, nil, func(b bindInput) bool { return *b.Limit == 3 }},
		{"S11 a string that spells a number is coerced", Input{"file_path": "/a", "limit": "10"}, nil, func(b bindInput) bool { return *b.Limit == 10 }},
		{"optional absent stays nil", Input{"file_path": "/a"}, nil, func(b bindInput) bool { return b.Limit == nil && b.Nested == nil }},
		{"S4 null counts as missing", Input{"file_path": nil}, []string{"Missing required parameter 'file_path'."}, nil},
		{"S10 every violation at once", Input{"limit": json.Number("3.5"), "replace_all": "yes", "tags": []any{1}},
			[]string{
				"Missing required parameter 'file_path'.",
				"Parameter 'limit' must be an integer, got number 3.5.",
				"Parameter 'replace_all' must be a boolean, got string \"yes\".",
				"Parameter 'tags[0]' must be a string, got number 1.",
			}, nil},
		{"nested path", Input{"file_path": "/a", "nested": map[string]any{}}, []string{"Missing required parameter 'nested.name'."}, nil},
		{"wrong container", Input{"file_path": []any{}, "nested": "x"}, []string{
			"Parameter 'file_path' must be a string, got an array.",
			"Parameter 'nested' must be an object, got string \"x\".",
		}, nil},
		{"not a number", Input{"file_path": "/a", "limit": "ten"}, []string{"Parameter 'limit' must be an integer, got string \"ten\"."}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bindInput
			vs := Bind(tt.in, &b)
			var got []string
			for _, v := range vs {
				got = append(got, v.Sentence)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.ok != nil && !tt.ok(b) {
				t.Errorf("bound %+v", b)
			}
		})
	}
}

func TestS6UnknownSentence(t *testing.T) {
	got := Sentences([]Violation{Unknown("file_paht", "file_path")}, false)
	if want := "Unknown parameter 'file_paht'. Did you mean 'file_path'? The tool was not executed."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Unknown("zzz", "").Sentence; got != "Unknown parameter 'zzz'." {
		t.Errorf("without a close name: %q", got)
	}
}

func TestC1ValidName(t *testing.T) {
	for name, want := range map[string]bool{"Read": true, "mcp__git_log-2": true, "": false, "a b": false, "Read(x)": false, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "ünï": false} {
		if ValidName(name) != want {
			t.Errorf("ValidName(%q) = %v", name, !want)
		}
	}
}

func TestK1MayRunInParallel(t *testing.T) {
	for _, c := range []struct {
		conc, intr string
		want       bool
	}{
		{ConcurrentSafe, Cooperative, true}, {ConcurrentSafe, NonInterruptible, true},
		{ConcurrentSafe, ThreadInterrupt, false}, {ConcurrentSafe, ExternallyTerminated, false},
		{Sequential, Cooperative, false}, {"", "", false},
	} {
		if got := MayRunInParallel(c.conc, c.intr); got != c.want {
			t.Errorf("MayRunInParallel(%q, %q) = %v", c.conc, c.intr, got)
		}
	}
}

func TestC4FileSetConcurrent(t *testing.T) {
	s := NewFileSet()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("/f%d", i)
			s.Add(p)
			if !s.Has(p) {
				t.Errorf("%s not recorded", p)
			}
		}()
	}
	wg.Wait()
	if s.Has("/other") {
		t.Error("a path never added is recorded")
	}
}

func TestC5Invoker(t *testing.T) {
	for chain, want := range map[string]string{"": "agent", "agent": "agent", "agent,subagent:r": "subagent", "agent,subagent:r,skill:lint": "skill"} {
		var c []string
		if chain != "" {
			c = strings.Split(chain, ",")
		}
		if got := (&Env{Chain: c}).Invoker(); got != want {
			t.Errorf("Invoker(%q) = %q, want %q", chain, got, want)
		}
	}
}

func FuzzBind(f *testing.F) {
	f.Add(`{"file_path":"/a","limit":3,"tags":["x"],"nested":{"name":"n"}}`)
	f.Add(`{"limit":"1e400","ratio":"NaN","tags":[[]]}`)
	f.Fuzz(func(t *testing.T, s string) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var in Input
		if dec.Decode(&in) != nil {
			return
		}
		var b bindInput
		for _, v := range Bind(in, &b) {
			if v.Sentence == "" || v.Path == "" {
				t.Fatalf("empty violation %+v", v)
			}
		}
	})
}

func TestS6Suggestion(t *testing.T) {
	declared := []string{"file_path", "offset", "limit", "-A", "-i", "-n", "output_mode"}
	for _, tc := range []struct{ name, want string }{
		{"file_paht", "file_path"},
		{"filepath", "file_path"},
		{"FILE_PATH", "file_path"}, // a case-only difference is the clearest typo
		{"-I", "-i"},               // not -A, at the same edit distance (issue 19)
		{"ofset", "offset"},
		{"limits", "limit"},
		{"-x", "-A"},
		{"zzzzzzzz", ""},
		{"output", ""},
		{"outputmode", "output_mode"},
		{"", ""},
	} {
		if got := Closest(tc.name, declared); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzC1ValidName holds ValidName to the regular expression rule C1 gives.
func FuzzC1ValidName(f *testing.F) {
	re := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, s := range []string{"Read", "", "a-b_c9", strings.Repeat("x", 64), strings.Repeat("x", 65), "é", "a b", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidName(name), re.MatchString(name); got != want {
			t.Fatalf("ValidName(%q) = %v, the rule's expression says %v", name, got, want)
		}
	})
}

// TestS10BindFieldsByType binds two struct types whose same Go field has
// different json tags, at once from many goroutines: the fields Bind keeps
// per type (read once, issue 49) are each type's own, a field tagged "-"
// or untagged is never bound, and a missing required field of either is
// still reported by its own name.
func TestS10BindFieldsByType(t *testing.T) {
	type one struct {
		Name string `json:"a"`
		Skip string `json:"-"`
		Bare string
	}
	type two struct {
		Name string `json:"b,omitempty"`
	}
	in := Input{"a": "from a", "b": "from b", "-": "no", "Skip": "no", "Bare": "no"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				var x one
				var y two
				if vs := Bind(in, &x); len(vs) > 0 || x != (one{Name: "from a"}) {
					t.Errorf("one: bound %+v, violations %v", x, vs)
					return
				}
				if vs := Bind(in, &y); len(vs) > 0 || y.Name != "from b" {
					t.Errorf("two: bound %+v, violations %v", y, vs)
					return
				}
				if vs := Bind(Input{"a": "x"}, &y); len(vs) != 1 || vs[0].Sentence != "Missing required parameter 'b'." {
					t.Errorf("two without b: %v", vs)
					return
				}
			}
		})
	}
	wg.Wait()
}
