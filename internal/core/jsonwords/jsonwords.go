// Package jsonwords says in words what a JSON decoder refused: where, and
// the kind of value given and the kind wanted, as JSON names them (a
// string, a list, an object), never a Go type, which a model or an
// operator cannot act on.
package jsonwords

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Problem is what a JSON decoder's err refused, in words: for a value of
// the wrong kind, "at permissions.allow, a string is given where a list
// of strings belongs"; for a syntax error, its message; any other error's
// own text, without the decoder's "json: " prefix.
func Problem(err error) string {
	var v2 *jsonv2.SemanticError
	if errors.As(err, &v2) && v2.GoType != nil && v2.JSONKind != 0 && v2.Err == nil {
		s := fmt.Sprintf("%s is given where %s belongs", kindOf(v2.JSONKind), wanted(v2.GoType))
		if p := strings.ReplaceAll(strings.TrimPrefix(string(v2.JSONPointer), "/"), "/", "."); p != "" {
			s = "at " + p + ", " + s
		}
		return s
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		if errors.Is(syn.Err, io.ErrUnexpectedEOF) && syn.ByteOffset == 0 {
			return "it is empty"
		}
		return strings.TrimPrefix(syn.Error(), "jsontext: ")
	}
	if errors.As(err, &v2) && v2.Err != nil {
		return strings.TrimPrefix(v2.Err.Error(), "jsontext: ")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		s := fmt.Sprintf("%s is given where %s belongs", given(te.Value), wanted(te.Type))
		if te.Field != "" {
			s = "at " + te.Field + ", " + s
		}
		return s
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return strings.TrimPrefix(se.Error(), "json: ")
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// Where is file:line:col of the place in data where err stopped the
// decoder, or file alone when err does not say.
func Where(file string, data []byte, err error) string {
	var off int64 = -1
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		off = te.Offset
	case errors.As(err, &se):
		off = se.Offset
	}
	if off <= 0 || off > int64(len(data)) {
		return file
	}
	line, col := Pos(data, off-1)
	return fmt.Sprintf("%s:%d:%d", file, line, col)
}

// Pos is the line and column, from 1, of byte off of data (a column
// counts bytes, as Go's and CUE's positions do).
func Pos(data []byte, off int64) (line, col int) {
	line, start := 1, 0
	for i := 0; i < int(off) && i < len(data); i++ {
		if data[i] == '\n' {
			line, start = line+1, i+1
		}
	}
	return line, int(off) - start + 1
}

// given names the kind of a value as UnmarshalTypeError holds it: a JSON
// kind (encoding/json's "string", "number 300", "array"), or the quoted
// start of the value (segmentio/encoding, the MCP SDK's decoder).
func given(v string) string {
	if u, err := strconv.Unquote(v); err == nil && u != "" {
		switch c := u[0]; {
		case c == '"':
			return "a string"
		case c == '{':
			return "an object"
		case c == '[':
			return "a list"
		case c == 't' || c == 'f':
			return "true or false"
		case c == 'n':
			return "null"
		default:
			return "a number"
		}
	}
	switch kind, _, _ := strings.Cut(v, " "); kind {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a value"
}

// kindOf names a JSON kind as jsontext reads it.
func kindOf(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a value"
}

// wanted names the kind of JSON value that decodes into t.
func wanted(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return wanted(t.Elem())
	case reflect.Slice, reflect.Array:
		if e := plural(t.Elem()); e != "" {
			return "a list of " + e
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}

// plural names the kind of a list's items; "" when any value will do.
func plural(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Map, reflect.Struct:
		return "objects"
	case reflect.Slice, reflect.Array:
		return "lists"
	case reflect.Bool:
		return "booleans"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "numbers"
	}
	return ""
}
