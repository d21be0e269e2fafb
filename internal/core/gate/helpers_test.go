package gate

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"

	"aimon.dev/gw/schema"
)

// schemaPackage builds the package aimon.dev/gw/schema from the embedded
// files, plus extra CUE source in the same package (a policy's narrowing).
func schemaPackage(t testing.TB, extra string) cue.Value {
	t.Helper()
	ctx := cuecontext.New()
	inst := build.NewContext().NewInstance("", nil)
	names, err := fs.Glob(schema.Files, "*.cue")
	if err != nil || len(names) == 0 {
		t.Fatalf("no schema files: %v", err)
	}
	for _, name := range names {
		src, err := fs.ReadFile(schema.Files, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := inst.AddFile(name, src); err != nil {
			t.Fatal(err)
		}
	}
	if extra != "" {
		if err := inst.AddFile("extra.cue", "package schema\n"+extra); err != nil {
			t.Fatal(err)
		}
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	return v
}

// compileCUE compiles a CUE schema given as source, at path (e.g. "#In").
func compileCUE(t testing.TB, src, path string) *Gate {
	t.Helper()
	v := cuecontext.New().CompileString(src)
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	g, err := Compile(v.LookupPath(cue.ParsePath(path)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func builtinGate(t testing.TB, def string) *Gate {
	t.Helper()
	g, err := Compile(schemaPackage(t, "").LookupPath(cue.ParsePath(def)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// decode reads a JSON object as the serve loop does: numbers as json.Number.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("bad test input %s: %v", s, err)
	}
	return m
}

func sentences(t testing.TB, g *Gate, input string) string {
	t.Helper()
	vs := g.Check(decode(t, input))
	if len(vs) == 0 {
		return ""
	}
	var b bytes.Buffer
	for i, v := range vs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(v.Sentence)
	}
	return b.String()
}

func cueCtx() *cue.Context { return cuecontext.New() }

func cueParse(s string) cue.Path { return cue.ParsePath(s) }
