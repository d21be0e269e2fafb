package allow

import (
	"errors"
	"strings"
	"testing"
)

func TestP1ParseEntry(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Entry
	}{
		{"Read", Entry{Tool: "Read", Raw: "Read"}},
		{"Bash(git:*)", Entry{Tool: "Bash", Pattern: "git:*", HasPattern: true, Raw: "Bash(git:*)"}},
		{"Read(/tmp/**)", Entry{Tool: "Read", Pattern: "/tmp/**", HasPattern: true, Raw: "Read(/tmp/**)"}},
		{"Read(/a/report(1).csv)", Entry{Tool: "Read", Pattern: "/a/report(1).csv", HasPattern: true, Raw: "Read(/a/report(1).csv)"}},
		{"Bash(npm install)", Entry{Tool: "Bash", Pattern: "npm install", HasPattern: true, Raw: "Bash(npm install)"}},
		{"my_tool-2", Entry{Tool: "my_tool-2", Raw: "my_tool-2"}},
	} {
		got, err := ParseEntry(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseEntry(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// TestP7ParseEntryBad: an entry that cannot be parsed is an error that
// quotes it; when its tool is readable the entry still counts as a pattern,
// so that it narrows its tool to nothing instead of leaving it unlimited.
func TestP7ParseEntryBad(t *testing.T) {
	for _, c := range []struct {
		in     string
		tool   string
		reason string
	}{
		{"", "", "not a valid tool name"},
		{"Re ad", "", "not a valid tool name"},
		{"(x)", "", "not a valid tool name"},
		{strings.Repeat("a", 65), "", "not a valid tool name"},
		{"Read(/tmp/**", "Read", "not closed"},
		{"Read(/tmp/**) ", "Read", "not closed"},
		{"Read()", "Read", "empty"},
		{"Read(  )", "Read", "empty"},
		{"Read(\xff)", "Read", "UTF-8"},
	} {
		got, err := ParseEntry(c.in)
		var ee *EntryError
		if !errors.As(err, &ee) {
			t.Errorf("ParseEntry(%q) error = %v, want an *EntryError", c.in, err)
			continue
		}
		if ee.Entry != c.in || !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), "cannot be used") {
			t.Errorf("ParseEntry(%q) error = %q, want the entry and %q", c.in, err, c.reason)
		}
		if got.Tool != c.tool || (c.tool != "" && !got.HasPattern) {
			t.Errorf("ParseEntry(%q) = %+v, want tool %q with a pattern", c.in, got, c.tool)
		}
	}
}

func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"Read", "Bash(git:*)", "Read(/tmp/**)", "Read(", "(", "Read()", "A(b)(c)", "Read(\x00)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if e.Raw != s {
			t.Fatalf("ParseEntry(%q).Raw = %q", s, e.Raw)
		}
		if err != nil {
			if e.Tool != "" && !e.HasPattern {
				t.Fatalf("ParseEntry(%q) failed but names a tool without pattern: %+v", s, e)
			}
			return
		}
		rebuilt := e.Tool
		if e.HasPattern {
			rebuilt += "(" + e.Pattern + ")"
		}
		if rebuilt != s {
			t.Fatalf("ParseEntry(%q) = %+v, which does not rebuild the entry", s, e)
		}
		// The compiled list must accept whatever parses, for every kind.
		for _, k := range []string{"Bash", "Read", "Echo", "Browser"} {
			ee := k
			if e.HasPattern {
				ee += "(" + e.Pattern + ")"
			}
			l, errs := Compile(testCtx, []string{ee}, testSubjects)
			if err := l.Value().Err(); err != nil {
				t.Fatalf("Compile(%q) gives a broken value: %v", ee, err)
			}
			for _, err := range errs {
				if strings.Contains(err.Error(), "internal error") {
					t.Fatalf("Compile(%q): %v", ee, err)
				}
			}
		}
	})
}
