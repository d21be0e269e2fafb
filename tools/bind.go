package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Bind fills the struct that dst points to from in, by the fields' json tags,
// and returns every violation at once in the gate's sentences (rule S10).
// A non-pointer field is required; a pointer field is optional. A string that
// spells a number is coerced (rule S11: under enforce the gate has already
// refused it). Undeclared names are the gate's concern, not Bind's.
func Bind(in Input, dst any) []Violation {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("tools.Bind: dst must point to a struct")
	}
	var vs []Violation
	bindStruct(in, rv.Elem(), "", &vs)
	return vs
}

func bindStruct(in map[string]any, sv reflect.Value, prefix string, vs *[]Violation) {
	st := sv.Type()
	for i := range st.NumField() {
		f := st.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		raw, ok := in[name]
		fv := sv.Field(i)
		if !ok || raw == nil {
			if f.Type.Kind() != reflect.Pointer && f.Type.Kind() != reflect.Slice {
				*vs = append(*vs, Missing(path))
			}
			continue
		}
		if f.Type.Kind() == reflect.Pointer {
			p := reflect.New(f.Type.Elem())
			if bindValue(raw, p.Elem(), path, vs) {
				fv.Set(p)
			}
			continue
		}
		bindValue(raw, fv, path, vs)
	}
}

func bindValue(raw any, v reflect.Value, path string, vs *[]Violation) bool {
	switch v.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			*vs = append(*vs, WrongType(path, "a string", raw))
			return false
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			*vs = append(*vs, WrongType(path, "a boolean", raw))
			return false
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		f, ok := number(raw)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			*vs = append(*vs, WrongType(path, "an integer", raw))
			return false
		}
		v.SetInt(int64(f))
	case reflect.Float64:
		f, ok := number(raw)
		if !ok {
			*vs = append(*vs, WrongType(path, "a number", raw))
			return false
		}
		v.SetFloat(f)
	case reflect.Slice:
		arr, ok := raw.([]any)
		if !ok {
			*vs = append(*vs, WrongType(path, "an array", raw))
			return false
		}
		out := reflect.MakeSlice(v.Type(), len(arr), len(arr))
		good := true
		for i, e := range arr {
			good = bindValue(e, out.Index(i), fmt.Sprintf("%s[%d]", path, i), vs) && good
		}
		v.Set(out)
		return good
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			*vs = append(*vs, WrongType(path, "an object", raw))
			return false
		}
		n := len(*vs)
		bindStruct(m, v, path+".", vs)
		return len(*vs) == n
	case reflect.Interface:
		v.Set(reflect.ValueOf(raw))
	default:
		panic("tools.Bind: unsupported field type " + v.Type().String())
	}
	return true
}

// number reads a JSON number, or a string that spells one (rule S11).
func number(raw any) (float64, bool) {
	switch n := raw.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return 0, false
}
