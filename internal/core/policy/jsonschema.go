package policy

import (
	"fmt"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/encoding/jsonschema"
)

// schemaKeywords are the members a JSON Schema of an object may have at
// its top; an input of YAML or JSON written with these alone is JSON
// Schema.
var schemaKeywords = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "type": true, "properties": true, "required": true,
	"additionalProperties": true, "patternProperties": true, "propertyNames": true, "unevaluatedProperties": true,
	"minProperties": true, "maxProperties": true, "dependentRequired": true, "title": true, "description": true,
	"examples": true, "default": true, "allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"if": true, "then": true, "else": true,
}

// inputSchemas converts, in a YAML or JSON policy file, each tool's input
// written as JSON Schema (type: object, properties, required, as the tool
// definitions of agent APIs are written) into the CUE it means, in place:
// a YAML author cannot write CUE's types, and a JSON Schema says the same
// as the CUE form would (required names are required fields, a schema
// without additionalProperties: false is open). The CUE keeps the YAML's
// positions, so a problem is reported at its file:line:col.
func inputSchemas(f *ast.File) error {
	imports := map[string]bool{}
	var specs []*ast.ImportSpec
	for _, tool := range fieldsOf(fieldValue(f.Decls, "tools")) {
		st, ok := tool.Value.(*ast.StructLit)
		if !ok {
			continue
		}
		for _, in := range st.Elts {
			field, ok := in.(*ast.Field)
			if !ok || labelName(field.Label) != "input" || !isJSONSchema(field.Value) {
				continue
			}
			v := cuecontext.New().BuildExpr(field.Value)
			out, err := jsonschema.Extract(v, &jsonschema.Config{DefaultVersion: jsonschema.VersionDraft2020_12})
			if err != nil {
				var all cueerrors.Error
				for _, e := range cueerrors.Errors(err) {
					format, args := e.Msg()
					all = cueerrors.Append(all, cueerrors.Newf(e.Position(), "tool %s: its input is read as JSON Schema (it says type: object), and %s; fix the schema", labelName(tool.Label), fmt.Sprintf(format, args...)))
				}
				return all
			}
			var elts []ast.Decl
			for _, d := range out.Decls {
				switch d := d.(type) {
				case *ast.ImportDecl:
					for _, s := range d.Specs {
						if !imports[s.Path.Value] {
							imports[s.Path.Value] = true
							specs = append(specs, s)
						}
					}
				case *ast.Attribute, *ast.Package:
				default:
					elts = append(elts, d)
				}
			}
			var schema ast.Expr = &ast.StructLit{Elts: elts}
			if len(elts) == 1 {
				if e, ok := elts[0].(*ast.EmbedDecl); ok {
					schema = e.Expr // close({...}) stays closed to the gate
				}
			}
			ast.SetPos(schema, field.Value.Pos())
			field.Value = schema
		}
	}
	if len(specs) > 0 {
		decls := []ast.Decl{&ast.ImportDecl{Specs: specs}}
		f.Decls = append(decls, f.Decls...)
	}
	return nil
}

// isJSONSchema reports whether an input, as YAML or JSON wrote it, is a
// JSON Schema: it says type: object or $schema, and has no member that
// JSON Schema does not define at an object schema's top.
func isJSONSchema(x ast.Expr) bool {
	fields := fieldsOf(x)
	if len(fields) == 0 {
		return false
	}
	marked := false
	for _, f := range fields {
		name := labelName(f.Label)
		if !schemaKeywords[name] {
			return false
		}
		if lit, ok := f.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			marked = marked || name == "$schema" || name == "type" && lit.Value == `"object"`
		}
	}
	return marked
}

// fieldValue is the value of the field name among decls; nil for none.
func fieldValue(decls []ast.Decl, name string) ast.Expr {
	for _, d := range decls {
		if f, ok := d.(*ast.Field); ok && labelName(f.Label) == name {
			return f.Value
		}
	}
	return nil
}

// fieldsOf are the fields of a struct literal; nil for anything else.
func fieldsOf(x ast.Expr) []*ast.Field {
	st, ok := x.(*ast.StructLit)
	if !ok {
		return nil
	}
	var out []*ast.Field
	for _, d := range st.Elts {
		if f, ok := d.(*ast.Field); ok {
			out = append(out, f)
		}
	}
	return out
}

func labelName(l ast.Label) string {
	name, _, _ := ast.LabelName(l)
	return name
}
