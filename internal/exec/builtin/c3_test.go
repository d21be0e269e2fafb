package builtin

import (
	"reflect"
	"testing"

	"aimon.dev/gw/tools"
)

// TestC3BuiltinsLeaveInputAndContextAlone: no built-in changes the input it
// is given or the context of its call (rule C3), whether the call succeeds
// or is refused: the gateway logs and decides on that input, and the
// context is shared by the calls of a session.
func TestC3BuiltinsLeaveInputAndContextAlone(t *testing.T) {
	env := session(t)
	env.Chain = []string{"agent", "subagent:x"}
	env.Scope = &tools.Scope{Anchor: env.Workdir}
	f := write(t, env.Workdir, "a.txt", "one\ntwo\nthree\n")
	calls := []struct{ note, tool, input string }{
		{"a read", "Read", `{"file_path":` + js(f) + `,"offset":2,"limit":1}`},
		{"a read of nothing", "Read", `{"file_path":` + js(f+".missing") + `}`},
		{"a write", "Write", `{"file_path":` + js(env.Workdir+"/b.txt") + `,"content":"x"}`},
		{"an edit", "Edit", `{"file_path":` + js(f) + `,"old_string":"two","new_string":"2","replace_all":true}`},
		{"an edit that finds nothing", "Edit", `{"file_path":` + js(f) + `,"old_string":"nowhere","new_string":"x"}`},
		{"a search", "Grep", `{"pattern":"o","path":` + js(env.Workdir) + `,"-i":true,"-n":true,"output_mode":"content"}`},
		{"a glob", "Glob", `{"pattern":"**/*.txt","path":` + js(env.Workdir) + `}`},
		{"a command", "Bash", `{"command":"echo hi","timeout":5000}`},
		{"an echo", "Echo", `{"message":"hi","times":2}`},
		{"an input of the wrong type", "Echo", `{"message":["not","a","string"],"times":"2"}`},
		{"nested values", "Grep", `{"pattern":"o","glob":{"a":[1,{"b":null}]}}`},
	}
	for _, c := range calls {
		t.Run(c.note, func(t *testing.T) {
			want := input(t, c.input)
			before := *env
			before.Chain = append([]string(nil), env.Chain...)
			before.Scope = &tools.Scope{Anchor: env.Scope.Anchor}
			call := input(t, c.input)
			tool, _ := Lookup(c.tool)
			r := tool.Run(t.Context(), env, call)
			if !reflect.DeepEqual(call, want) {
				t.Errorf("%s changed its input: %v, was %v (result %q)", c.tool, call, want, r.Text)
			}
			if env.Workdir != before.Workdir || env.CallID != before.CallID || !reflect.DeepEqual(env.Chain, before.Chain) ||
				env.Files != before.Files || env.Scope.Anchor != before.Scope.Anchor || env.MaxFileBytes != before.MaxFileBytes {
				t.Errorf("%s changed its context: %+v, was %+v", c.tool, *env, before)
			}
		})
	}
}
