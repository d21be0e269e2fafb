package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// A Shape is what a secret looks like in a result (rule P18): one the
// gateway knows by name, or a pattern of the policy's own (RE2).
type Shape struct {
	Name    string
	Pattern string `json:",omitempty"` // "" for a known shape
}

// knownShape is a shape the gateway knows: its pattern, and literals one
// of which any match holds, so that a text holding none is not scanned.
type knownShape struct {
	pattern string
	markers []string
}

// knownShapes are the secrets' shapes a label's content may name. A
// private key block is matched to its end, or to the end of the text when
// it is cut off; tokens by their prefixes and lengths as the issuers
// document them.
var knownShapes = map[string]knownShape{
	"private-key": {`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)`,
		[]string{"PRIVATE KEY"}},
	"aws-access-key": {`\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b`, []string{"AKIA", "ASIA", "ABIA", "ACCA"}},
	"aws-secret-key": {`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}\b`, []string{"ecret", "ECRET"}},
	"github-token":   {`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	"gitlab-token":   {`\bgl(?:pat|dt|rt|ptt|soat|cbt|ffct)-[A-Za-z0-9_-]{20,}`, []string{"glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "glffct-"}},
}

// ShapeNames are the shapes the gateway knows, sorted.
func ShapeNames() []string {
	names := make([]string, 0, len(knownShapes))
	for n := range knownShapes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// contentOf reads a label's content and redact, reporting what cannot be
// used: a shape the gateway does not know, a pattern that does not
// compile or that matches an empty text (it would match every result), a
// redact with nothing to redact.
func (c *compiler) contentOf(l *Label, lv cue.Value) {
	iter, err := lv.LookupPath(cue.ParsePath("content")).List()
	for err == nil && iter.Next() {
		v := iter.Value()
		at := c.pos(v, 0)
		if name, err := v.String(); err == nil {
			if _, ok := knownShapes[name]; !ok {
				msg := fmt.Sprintf("label %s content names the shape %q, which the gateway does not know, so it would match nothing", l.Name, name)
				if near := tools.Closest(name, ShapeNames()); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				} else {
					msg += "; the shapes are " + joinNames(ShapeNames()) + ", or give {name, pattern} of your own."
				}
				c.errs = append(c.errs, Diagnostic{Pos: at, Code: rule.P18, Message: msg})
				continue
			}
			l.Content = append(l.Content, Shape{Name: name})
			continue
		}
		s := Shape{Name: str(v.LookupPath(cue.ParsePath("name"))), Pattern: str(v.LookupPath(cue.ParsePath("pattern")))}
		pat := v.LookupPath(cue.ParsePath("pattern"))
		re, err := regexp.Compile(s.Pattern)
		switch {
		case s.Name == "" || s.Pattern == "":
			c.errs = append(c.errs, Diagnostic{Pos: at, Code: rule.P18, Message: fmt.Sprintf("label %s content: a shape of the policy's own needs a name (what [redacted NAME] says) and a pattern (RE2), as {name: \"internal-token\", pattern: \"itk_[a-z0-9]{32}\"}.", l.Name)})
			continue
		case err != nil:
			c.errs = append(c.errs, Diagnostic{Pos: c.pos(pat, 0), Code: rule.P18, Message: fmt.Sprintf("label %s content %s: the pattern %q is not a regular expression (RE2) the gateway can use: %v; correct it.", l.Name, s.Name, s.Pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))})
			continue
		case re.MatchString(""):
			c.errs = append(c.errs, Diagnostic{Pos: c.pos(pat, 0), Code: rule.P18, Message: fmt.Sprintf("label %s content %s: the pattern %q matches an empty text, so it would match every result; make it match the secret itself.", l.Name, s.Name, s.Pattern)})
			continue
		}
		l.Content = append(l.Content, s)
	}
	rv := lv.LookupPath(cue.ParsePath("redact"))
	l.Redact, _ = rv.Bool()
	if l.Redact && len(l.Content) == 0 && rv.Exists() {
		c.errs = append(c.errs, Diagnostic{Pos: c.pos(rv, 0), Code: rule.P18, Message: fmt.Sprintf("label %s redacts, and names no content to redact; give it content: [\"private-key\", ...], or remove redact.", l.Name)})
	}
}

// contentShape is a shape compiled.
type contentShape struct {
	label, name string
	redact      bool
	re          *regexp.Regexp
	markers     []string // none: always scanned
}

// compileContent compiles the shapes of every label (patterns were
// checked at load, so one that does not compile here is left out).
func compileContent(s *Sessions) []contentShape {
	var out []contentShape
	for _, l := range s.Labels {
		for _, sh := range l.Content {
			pattern, markers := sh.Pattern, []string(nil)
			if k, ok := knownShapes[sh.Name]; ok && sh.Pattern == "" {
				pattern, markers = k.pattern, k.markers
			}
			if re, err := regexp.Compile(pattern); err == nil {
				out = append(out, contentShape{label: l.Name, name: sh.Name, redact: l.Redact, re: re, markers: markers})
			}
		}
	}
	return out
}

// Content reads what a result's text holds (rule P18): the labels whose
// content matches it, sorted, and the text as the model may see it, each
// match of a redacting label's shapes replaced by [redacted NAME]. A text
// that holds none is returned as it is, with no labels.
func (g *Generation) Content(text string) (string, []string) {
	s := g.Session
	if s == nil || text == "" {
		return text, nil
	}
	var labels []string
	for _, sh := range s.lists(g).content {
		if len(sh.markers) > 0 && !slices.ContainsFunc(sh.markers, func(m string) bool { return strings.Contains(text, m) }) {
			continue
		}
		if !sh.re.MatchString(text) {
			continue
		}
		if !slices.Contains(labels, sh.label) {
			labels = append(labels, sh.label)
		}
		if sh.redact {
			text = sh.re.ReplaceAllLiteralString(text, "[redacted "+sh.name+"]")
		}
	}
	slices.Sort(labels)
	return text, labels
}
