package tools

import (
	"fmt"
	"strings"
)

// A Violation is one way an input breaks its schema. The gate and a tool's
// typed binding produce the same sentences (rule S10).
type Violation struct {
	// Path names the parameter: "file_path", "edits[0].old_string".
	Path string
	// Sentence says what is wrong and what to do, for the model.
	Sentence string
}

// NotExecuted ends the error text of a call the gate refused.
const NotExecuted = "The tool was not executed."

// Missing is the violation of a required parameter that is absent or null.
func Missing(path string) Violation {
	return Violation{path, fmt.Sprintf("Missing required parameter '%s'.", path)}
}

// WrongType is the violation of a parameter whose JSON type is not the declared one.
func WrongType(path, want string, got any) Violation {
	return Violation{path, fmt.Sprintf("Parameter '%s' must be %s, got %s.", path, want, Describe(got))}
}

// OutOfRange is the violation of an integer the tool cannot hold: it is an
// integer (rule S5), just not one in [min, max].
func OutOfRange(path string, got any, min, max int64) Violation {
	return Violation{path, fmt.Sprintf("Parameter '%s' must be an integer from %d to %d, got %s, which is out of range.", path, min, max, Describe(got))}
}

// Unknown is the violation of an undeclared parameter where the schema is
// closed (rule S6); suggestion is "" when no declared name is close.
func Unknown(path, suggestion string) Violation {
	s := fmt.Sprintf("Unknown parameter '%s'.", path)
	if suggestion != "" {
		s += fmt.Sprintf(" Did you mean '%s'?", suggestion)
	}
	return Violation{path, s}
}

// OneOf is the violation of a parameter outside its enum; allowed are the
// values as literals ("content", 3, true).
func OneOf(path string, allowed []string, got any) Violation {
	return Violation{path, fmt.Sprintf("Parameter '%s' must be one of %s, got %s.", path, strings.Join(allowed, ", "), Describe(got))}
}

// Unsatisfied is the violation of a constraint a schema's author wrote
// (a bound, a regular expression), given in CUE syntax.
func Unsatisfied(path, constraint string, got any) Violation {
	if path == "" {
		return Violation{path, fmt.Sprintf("The input must satisfy %s.", constraint)}
	}
	return Violation{path, fmt.Sprintf("Parameter '%s' must satisfy %s, got %s.", path, constraint, Describe(got))}
}

// Limit is the violation of a size limit of the gate; what says what is
// too large ("is nested more than 64 levels deep").
func Limit(path, what string) Violation {
	if path == "" {
		return Violation{path, fmt.Sprintf("The input %s.", what)}
	}
	return Violation{path, fmt.Sprintf("Parameter '%s' %s.", path, what)}
}

// Sentences joins the violations' sentences, then says the tool did not run.
func Sentences(vs []Violation, executed bool) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.Sentence)
	}
	if !executed {
		b.WriteString(" " + NotExecuted)
	}
	return b.String()
}

// Describe names a decoded JSON value for a sentence: `string "x"`, `number 3.5`.
func Describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("number %v", v)
	}
}
