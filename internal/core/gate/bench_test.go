package gate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"cuelang.org/go/cue"
	cuejson "cuelang.org/go/encoding/json"
)

// FuzzCheck: no input makes the gate panic, whatever the decoder let
// through (encoding/json allows 10000 levels and any length).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"file_path": "/a"}`, `{"file_paht": 1, "edits": [{"old": 3.0}]}`, `{"a": {"b": {"c": [1, [2, {"x-1": null}]]}}}`,
		`{"mode": 1e400, "n": -0.0, "u": {"k": "a", "x": 1}}`, `{"lo": 5, "hi": 1}`, `{"s": {"x": "1"}, "t": {}}`,
	} {
		f.Add([]byte(s))
	}
	cs := diffGates(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var in map[string]any
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if d.Decode(&in) != nil {
			return
		}
		var floats map[string]any
		_ = json.Unmarshal(data, &floats)
		for _, c := range cs {
			c.gate.Check(in)
			if floats != nil {
				c.gate.Check(floats)
			}
		}
	})
}

var benchInputs = []struct {
	name, def, input string
}{
	{"edit-valid", "#EditInput", `{"file_path": "/srv/app/main.go", "old_string": "func main() {\n\tfmt.Println(\"hi\")\n}", "new_string": "func main() {\n\tfmt.Println(\"hello\")\n}", "replace_all": false}`},
	{"edit-invalid", "#EditInput", `{"file_paht": "/srv/app/main.go", "old_string": 3, "new_string": null, "replace_all": "yes", "extra": [1, 2, 3]}`},
	{"grep-valid", "#GrepInput", `{"pattern": "func [A-Z]\\w+", "path": "/srv", "glob": "*.go", "output_mode": "content", "-i": true, "-n": true, "-A": 2, "head_limit": 50}`},
	{"narrowed-valid", "narrowed.input", `{"file_path": "/srv/app/main.go", "offset": 10, "limit": 100}`},
	{"narrowed-invalid", "narrowed.input", `{"file_path": "/etc/passwd", "offset": 10, "limit": 0}`},
	// A constraint the shape leaves to CUE (one field bounded by another).
	{"cue-path-valid", "cross.input", `{"file_path": "/srv/a", "offset": 10, "limit": 100}`},
}

// BenchmarkGate measures the gate against encoding/json.Unmarshal of the
// same input in the same run (target: at most 10×), and against a plain
// Extract+Unify+Validate per call.
func BenchmarkGate(b *testing.B) {
	pkg := schemaPackage(b, `narrowed: #Read & {input: file_path: =~"^/srv/", input: limit?: int & >=1 & <=10000}
cross: #Read & {input: {offset?: int, limit?: int & >=offset}}`)
	for _, bi := range benchInputs {
		schema := pkg.LookupPath(cue.ParsePath(bi.def))
		g, err := Compile(schema)
		if err != nil {
			b.Fatal(err)
		}
		data := []byte(bi.input)
		in := decode(b, bi.input)
		b.Run(bi.name, func(b *testing.B) {
			unmarshal := func() {
				var m map[string]any
				if err := json.Unmarshal(data, &m); err != nil {
					b.Fatal(err)
				}
			}
			plainCUE := func() {
				expr, err := cuejson.Extract("input", data)
				if err != nil {
					b.Fatal(err)
				}
				_ = schema.Unify(schema.Context().BuildExpr(expr)).Validate(cue.Concrete(true))
			}
			// Interleave the three in small chunks, so that a busy machine
			// slows them alike and the ratios hold.
			var dDecode, dGate, dCUE time.Duration
			nCUE := 0
			chunk := max(b.N/20, 1)
			b.ResetTimer()
			for done := 0; done < b.N; done += chunk {
				k := min(chunk, b.N-done)
				dDecode += timeLoop(k, unmarshal)
				dGate += timeLoop(k, func() { g.Check(in) })
				kc := max(k/10, 1)
				dCUE += timeLoop(kc, plainCUE)
				nCUE += kc
			}
			perOp := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }
			b.ReportMetric(perOp(dGate, b.N), "gate-ns/op")
			b.ReportMetric(perOp(dDecode, b.N), "decode-ns/op")
			b.ReportMetric(perOp(dGate, b.N)/perOp(dDecode, b.N), "gate/decode")
			b.ReportMetric(perOp(dCUE, nCUE)/perOp(dDecode, b.N), "cue/decode")
		})
	}
}

func timeLoop(n int, f func()) time.Duration {
	start := time.Now()
	for range n {
		f()
	}
	return time.Since(start)
}

var soak = flag.Bool("soak", false, "run the soak test: a million inputs with random unknown names")

// TestSoakUnknownNames gates a million inputs with random unknown names,
// on a closed built-in and on an open schema whose constraints send every
// input through CUE, and checks the heap grows by less than 10%: no name
// from the wire is interned by CUE.
func TestSoakUnknownNames(t *testing.T) {
	if !*soak {
		t.Skip("soak test: run with go test -run Soak -soak")
	}
	read := builtinGate(t, "#ReadInput")
	// A string bound is left to CUE: every input goes through Unify+Validate.
	open := compileCUE(t, `#Open: {path!: string & >="/", n?: int & >=1, ...}`, "#Open")
	if !open.root.CUE {
		t.Fatal("the open schema no longer goes through CUE; pick a constraint that does")
	}
	r := rand.New(rand.NewPCG(5, 6))
	randomName := func() string {
		b := make([]byte, 8+r.IntN(16))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	const total = 1_000_000
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var base uint64
	for i := range total {
		if i == total/10 {
			base = heap() // after warm-up: caches and pools are full
		}
		closedIn := map[string]any{"file_path": "/srv/x"}
		openIn := map[string]any{"path": "/srv/x", "n": json.Number("3")}
		for range 3 {
			closedIn[randomName()] = json.Number(fmt.Sprint(r.IntN(100)))
			openIn[randomName()] = json.Number(fmt.Sprint(r.IntN(100)))
		}
		if vs := read.Check(closedIn); len(vs) != 3 {
			t.Fatalf("closed schema: %d violations for 3 unknown names: %v", len(vs), vs)
		}
		if vs := open.Check(openIn); len(vs) != 0 {
			t.Fatalf("open schema refused %v: %v", openIn, vs)
		}
	}
	end := heap()
	growth := float64(int64(end)-int64(base)) / float64(base)
	t.Logf("heap after warm-up %d bytes, after %d inputs %d bytes: growth %.2f%%", base, total, end, 100*growth)
	if growth > 0.10 {
		t.Fatalf("heap grew by %.1f%% over %d inputs with random names; want under 10%%", 100*growth, total)
	}
}
