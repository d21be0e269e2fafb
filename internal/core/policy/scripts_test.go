package policy

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestR3EveryPolicyRestoresAsLoaded: the saved plan of each policy of the
// shipped examples, the default policy, the CLI's golden scripts (about a
// hundred policies of every feature) and two made ones restores, read
// token by token (plandec.go, jsontok), to the plan it was saved from, byte
// for byte; and the load, with its shortcuts (memo.go, elide.go), gives
// the generation a load evaluating every tool alone gives, or the same
// sentences (R3, C1; issue 49). Only ImplPos may differ: a shared
// declaration names its implementation's expression, a tool evaluated
// alone its field.
func TestR3EveryPolicyRestoresAsLoaded(t *testing.T) {
	var alike strings.Builder
	alike.WriteString(header + "tools: {\n")
	for i := range 30 {
		fmt.Fprintf(&alike, "\tE%d: schema.#Echo\n\tR%d: schema.#Read & {input: file_path: =~\"^/srv/\"}\n", i, i)
	}
	alike.WriteString("\tD: E3 & {timeout: \"4s\"}\n}\nagent: \"allowed-tools\": [\"E1\", \"R2(/srv/**)\", \"D\"]\n")
	dirs := map[string]string{
		"default":  "../defaultpolicy",
		"distinct": distinctPolicy(t, 30),
		"alike": writePolicy(t, map[string]string{"policy.cue": alike.String(),
			"more.cue": "package policy\n\ntools: E5: timeout: \"9s\"\n"}),
	}
	examples, _ := filepath.Glob("../../../examples/policies/*")
	for _, d := range examples {
		dirs["example "+filepath.Base(d)] = d
	}
	for _, d := range scriptPolicies(t) {
		dirs["script "+d] = d
	}
	implPos := regexp.MustCompile(`"ImplPos":\{[^}]*\}`)
	restored := 0
	for note, dir := range dirs {
		shortcut, errS := Load(dir)
		shareTools = false
		whole, errW := Load(dir)
		shareTools = true
		if errS != nil || errW != nil {
			if errS == nil || errW == nil || errS.Error() != errW.Error() || !strings.HasPrefix(note, "script ") {
				t.Errorf("%s: the load says\n%v\nwith every tool evaluated\n%v", note, errS, errW)
			}
			continue // a script's policy may be wrong on purpose
		}
		s, err := shortcut.Save()
		if err != nil {
			continue // a plugin's tool, whose schema its implementation declares
		}
		if w, _ := whole.Save(); !bytes.Equal(implPos.ReplaceAll(s, nil), implPos.ReplaceAll(w, nil)) {
			t.Errorf("%s: the generation differs from one with every tool evaluated", note)
		}
		r, err := Restore(s)
		if err != nil {
			t.Errorf("%s: the saved plan does not restore: %v", note, err)
			continue
		}
		if again, _ := r.Save(); !bytes.Equal(again, s) {
			t.Errorf("%s: the restored plan saves otherwise", note)
		}
		restored++
	}
	if restored < 50 {
		t.Errorf("only %d policies were restored: the test compares too little", restored)
	}
}
