package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestR3PolicyThatEmbedsFilesIsRefused: CUE's @extern(embed) reads files
// that are no input of the load (not in its revision, not watched, not in
// a reuse key), so an edit of one was missed: a reload reused the tool
// compiled from the old contents, and the load cache's record still
// verified. Such a policy is refused, wherever the attribute lies.
func TestR3PolicyThatEmbedsFilesIsRefused(t *testing.T) {
	const tools = "tools: {\n\tA: schema.#Echo & {input: message: =~_pat}\n}\n"
	for _, tc := range []struct {
		note  string
		files map[string]string
		want  string // "" to load
	}{
		{note: "a text file embedded beside the policy", want: "a.cue:1:1: ",
			files: map[string]string{"a.cue": "@extern(embed)\n" + header + tools + "_pat: _ @embed(file=\"pat.txt\", type=text)\n", "pat.txt": "^a"}},
		{note: "a JSON file in a subdirectory", want: "a.cue:1:1: ",
			files: map[string]string{"a.cue": "@extern(embed)\n" + header + tools + "_pat: _j.p\n_j: _ @embed(file=\"d/p.json\")\n", "d/p.json": "{\"p\": \"^a\"}"}},
		{note: "an imported package of the module embeds", want: "sub/s.cue:1:1: ",
			files: map[string]string{"a.cue": header + "import \"example.com/p/sub\"\n\n" + tools + "_pat: sub.p\n",
				"sub/s.cue": "@extern(embed)\npackage sub\n\np: _ @embed(file=\"pat.txt\", type=text)\n", "sub/pat.txt": "^a"}},
		{note: "an @embed attribute without @extern is only an attribute",
			files: map[string]string{"a.cue": header + tools + "_pat: \"^a\" @embed(file=\"pat.txt\", type=text)\n", "pat.txt": "^m"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := writePolicy(t, tc.files)
			prev, err := Load(dir, WithPrevious(nil), WithWorkdir("/w"))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				// What the refusal prevents: the embedded file edited, and
				// the reload keeping the tool its old contents made.
				for name := range tc.files {
					if strings.HasSuffix(name, "pat.txt") {
						os.WriteFile(filepath.Join(dir, name), []byte("^m"), 0o644)
					}
				}
				os.WriteFile(filepath.Join(dir, "d", "p.json"), []byte("{\"p\": \"^m\"}"), 0o644)
				reloadLike(t, dir, prev)
				t.Fatal("a policy that embeds files loaded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "@extern(embed)") || !strings.Contains(err.Error(), ".yaml or .json") {
				t.Fatalf("the refusal says:\n%v\nwant it at %s, naming @extern(embed) and what to write instead", err, tc.want)
			}
		})
	}
}
