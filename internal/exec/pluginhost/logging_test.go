package pluginhost

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	recs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, b.String())
	r.mu.Unlock()
	return nil
}

func TestLineLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string
	}{
		{"plain", []string{"hello\n"}, []string{"INFO m line=hello"}},
		{"split writes", []string{"hel", "lo", "\n"}, []string{"INFO m line=hello"}},
		{"several lines", []string{"a\nb\r\n\n  \nc"}, []string{"INFO m line=a", "INFO m line=b"}},
		{"prefix level", []string{"[ERROR] bad\n[DEBUG] x\n"}, []string{"ERROR m line=[ERROR] bad", "DEBUG m line=[DEBUG] x"}},
		{"go panic", []string{"panic: boom\n"}, []string{"ERROR m line=panic: boom"}},
		{"hclog JSON", []string{`{"@level":"warn","@message":"disk full","@timestamp":"x","path":"/x","n":2}` + "\n"},
			[]string{"WARN disk full plugin.n=2 plugin.path=/x"}},
		{"JSON with a number message", []string{`{"@message": 1, "@level": 2}` + "\n"},
			[]string{`INFO m line={"@message": 1, "@level": 2}`}},
		{"JSON with a bad level", []string{`{"@message": "x", "@level": 2}` + "\n"}, []string{"INFO x"}},
		{"not an object", []string{"[1,2]\n"}, []string{"INFO m line=[1,2]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &records{}
			w := newLineLog(slog.New(r), slog.LevelInfo, "m")
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if strings.Join(r.recs, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("logged\n%s\nwant\n%s", strings.Join(r.recs, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestLineLogCutsLongLines(t *testing.T) {
	r := &records{}
	w := newLineLog(slog.New(r), slog.LevelInfo, "m")
	w.Write(bytes.Repeat([]byte("x"), maxLine+10))
	if len(r.recs) != 1 || len(r.recs[0]) != len("INFO m line=")+maxLine {
		t.Errorf("a long line gave %d records", len(r.recs))
	}
}

// go-plugin's own messages keep their level; only the "stdio" child of
// the adapter is on, so that go-plugin never parses plugin stderr.
func TestHCLogAdapter(t *testing.T) {
	r := &records{}
	l := newHCLog(slog.New(r))
	l.With("a", 1).Warn("w", "b", 2)
	l.Named("stdio").Debug("d")
	named := l.Named("myplugin")
	named.Error("dropped")
	if named.GetLevel() != hclog.Off || l.GetLevel() == hclog.Off {
		t.Errorf("levels: named %v, root %v", named.GetLevel(), l.GetLevel())
	}
	want := "WARN w a=1 b=2\nDEBUG d go-plugin=stdio"
	if got := strings.Join(r.recs, "\n"); got != want {
		t.Errorf("logged\n%s\nwant\n%s", got, want)
	}
}

func FuzzLineLog(f *testing.F) {
	for _, s := range []string{"a\nb", `{"@message":1}` + "\n", `{"@message":"m","@level":{}}` + "\n", "\r\n\n", "[WARN] x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) >= maxLine {
			return
		}
		r := &records{}
		w := newLineLog(slog.New(r), slog.LevelInfo, "m")
		w.Write([]byte(s))
		lines := strings.Split(s, "\n")
		want := 0
		for _, l := range lines[:len(lines)-1] {
			if strings.TrimSpace(strings.TrimRight(l, "\r")) != "" {
				want++
			}
		}
		if len(r.recs) != want {
			t.Errorf("%q gave %d records; want %d", s, len(r.recs), want)
		}
	})
}
