package gate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/need"
	"cuelang.org/go/cue/cuecontext"
)

// suiteDir is the JSON Schema Test Suite subset beside the repository.
const suiteDir = "../../../../shared/testdata/json-schema-test-suite"

const baselineFile = "testdata/json-schema-suite-baseline.txt"

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// readBaseline reads "file | group | test | rule" lines: the cases where the
// gate departs from JSON Schema on purpose, with the rule that says why.
func readBaseline(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(baselineFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 4 || !strings.HasPrefix(parts[3], "S") {
			t.Fatalf("%s: bad line %q: want file | group | test | rule and reason", baselineFile, line)
		}
		base[strings.Join(parts[:3], " | ")] = parts[3]
	}
	return base
}

// TestJSONSchemaSuite runs the outside suite through the import path in
// enforce mode (a non-empty violation list refuses the call).
func TestJSONSchemaSuite(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(suiteDir, "*.json"))
	if len(files) == 0 {
		need.Missing(t, "the JSON Schema Test Suite is needed at %s (the repository's sibling shared/testdata); check the shared tree out beside the repository", suiteDir)
	}
	base := readBaseline(t)
	ctx := cuecontext.New()
	var ran, skipped, departed int
	var disagree []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(data, &groups); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, g := range groups {
			gate, importErr := func() (*Gate, error) {
				v, err := ImportJSONSchema(ctx, g.Schema)
				if err != nil {
					return nil, err
				}
				return Compile(v)
			}()
			for _, tc := range g.Tests {
				d := json.NewDecoder(bytes.NewReader(tc.Data))
				d.UseNumber()
				var in map[string]any
				if d.Decode(&in) != nil || in == nil {
					skipped++ // not an object: cannot be a tool's input
					continue
				}
				ran++
				valid := false
				if importErr == nil {
					valid = len(gate.Check(in)) == 0
				}
				key := fmt.Sprintf("%s | %s | %s", filepath.Base(file), g.Description, tc.Description)
				_, inBase := base[key]
				if valid != tc.Valid {
					if inBase {
						departed++
						delete(base, key)
						continue
					}
					why := ""
					if importErr != nil {
						why = " (import: " + importErr.Error() + ")"
					}
					disagree = append(disagree, fmt.Sprintf("%s: gate says valid=%v, suite says %v%s", key, valid, tc.Valid, why))
				}
			}
		}
	}
	for _, d := range disagree {
		t.Error(d)
	}
	stale := slices.Sorted(func(yield func(string) bool) {
		for k := range base {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range stale {
		t.Errorf("baseline entry now agrees with the suite or names no case, remove it: %s", k)
	}
	t.Logf("JSON Schema Test Suite: %d object cases run, %d deliberate departures (baseline), %d non-object cases skipped", ran, departed, skipped)
	if ran == 0 {
		t.Fatal("no case ran")
	}
}
