package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"sync"
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

// field is one bound field of a struct: its index, its json name, and
// whether it is optional (a pointer, or a slice that may be absent).
type field struct {
	index    int
	name     string
	pointer  bool
	optional bool
}

// fieldsOf caches each struct type's bound fields: reading the tags by
// reflection on every call was a tenth of serve's processor time on an
// Echo stream (issue 49).
var fieldsOf sync.Map // reflect.Type → []field

func fields(st reflect.Type) []field {
	if fs, ok := fieldsOf.Load(st); ok {
		return fs.([]field)
	}
	var fs []field
	for i := range st.NumField() {
		f := st.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		k := f.Type.Kind()
		fs = append(fs, field{index: i, name: name, pointer: k == reflect.Pointer, optional: k == reflect.Pointer || k == reflect.Slice})
	}
	fieldsOf.Store(st, fs)
	return fs
}

func bindStruct(in map[string]any, sv reflect.Value, prefix string, vs *[]Violation) {
	for _, f := range fields(sv.Type()) {
		path := prefix + f.name
		raw, ok := in[f.name]
		fv := sv.Field(f.index)
		if !ok || raw == nil {
			if !f.optional {
				*vs = append(*vs, Missing(path))
			}
			continue
		}
		if f.pointer {
			p := reflect.New(fv.Type().Elem())
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
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if v.Kind() == reflect.Int32 {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if x, ok := raw.(json.Number); ok {
			// The common case, exactly, without a big.Int.
			if i, err := strconv.ParseInt(string(x), 10, 64); err == nil && i >= lo && i <= hi {
				v.SetInt(i)
				return true
			}
		}
		n, integral, ok := integer(raw)
		if !ok || !integral {
			*vs = append(*vs, WrongType(path, "an integer", raw))
			return false
		}
		if !n.IsInt64() || n.Int64() < lo || n.Int64() > hi {
			*vs = append(*vs, OutOfRange(path, raw, lo, hi))
			return false
		}
		v.SetInt(n.Int64())
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

// integer reads a JSON number, or a string that spells one (rule S11),
// exactly: 9007199254740993 stays itself, 3.0 is the integer 3 (rule S5),
// and 1e400 an integer too large for any tool. ok is false for what is not
// a number; integral false for one with a fraction.
func integer(raw any) (n *big.Int, integral, ok bool) {
	var s string
	switch x := raw.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return big.NewInt(i), true, true // the common case, exactly
		}
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return nil, false, !math.IsInf(x, 0)
		}
		n, _ = new(big.Float).SetFloat64(x).Int(nil)
		return n, true, true
	case int:
		return big.NewInt(int64(x)), true, true
	default:
		return nil, false, false
	}
	// An exponent past this many digits would only fill memory.
	if len(s) > 1000 || strings.ContainsAny(s, "eE") && exponentTooLarge(s) {
		return nil, false, false
	}
	r, good := new(big.Rat).SetString(s)
	if !good {
		return nil, false, false
	}
	if !r.IsInt() {
		return nil, false, true
	}
	return r.Num(), true, true
}

// exponentTooLarge reports a number spelling whose exponent is past 4000.
func exponentTooLarge(s string) bool {
	i := strings.IndexAny(s, "eE")
	e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return err != nil || e > 4000 || e < -4000
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
