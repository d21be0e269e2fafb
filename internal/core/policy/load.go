// Package policy loads a policy directory written in CUE into an immutable
// Generation: the compiled tools, surfaces and settings the gateway serves.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	stderrors "errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cuebuild "cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"
	cuejson "cuelang.org/go/encoding/json"
	cueyaml "cuelang.org/go/encoding/yaml"
	"cuelang.org/go/mod/modfile"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/schema"
)

// Each generation is compiled in a CUE context of its own: a context keeps
// every label and value it ever saw, so a process-wide one would grow with
// every reload. The shipped schema is parsed once and built per context.
var shipped struct {
	once sync.Once
	inst *cuebuild.Instance
}

// schemaRoot is where the shipped schema package is laid out in overlays.
const schemaRoot = "/aimon-gw.embedded/schema"

// sources are the bytes CUE parses of each file laid over for it, by its
// path: the policy's .cue files, read once, and the shipped schema. A
// digest of a whole file (the revision, a reload's reuse keys) hashes them
// rather than the file's syntax formatted again, which was a tenth of a
// load (issue 49); equal bytes are equal syntax, at equal places.
type sources map[string][]byte

// text is f's bytes as CUE parsed them, or its syntax formatted where src
// does not hold them, marked so that the two never read alike.
func (src sources) text(f *ast.File) ([]byte, error) {
	if b, ok := src[f.Filename]; ok {
		return b, nil
	}
	b, err := format.Node(f)
	return append([]byte("\x00formatted\x00"), b...), err
}

// lay lays data over path for CUE, and keeps it in src.
func (src sources) lay(ov map[string]load.Source, path string, data []byte) {
	ov[path] = load.FromBytes(data)
	if src != nil {
		src[path] = data
	}
}

func schemaOverlay(dir string, ov map[string]load.Source, src sources) {
	fs.WalkDir(schema.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := fs.ReadFile(schema.Files, p)
			src.lay(ov, filepath.Join(dir, filepath.FromSlash(p)), data)
		}
		return nil
	})
}

// Schema returns the shipped schema package as a CUE value in ctx.
func Schema(ctx *cue.Context) (cue.Value, error) {
	shipped.once.Do(func() {
		ov := map[string]load.Source{
			schemaRoot + "/cue.mod/module.cue": load.FromString(fmt.Sprintf("module: %q\nlanguage: version: \"v0.12.0\"\n", schema.Module)),
		}
		schemaOverlay(schemaRoot+"/schema", ov, nil)
		shipped.inst = load.Instances([]string{"./schema"}, &load.Config{Dir: schemaRoot, Overlay: ov})[0]
	})
	if err := shipped.inst.Err; err != nil {
		return cue.Value{}, err
	}
	v := ctx.BuildInstance(shipped.inst)
	return v, v.Err()
}

// Load loads the policy in dir: the CUE package there, in a CUE module (a
// cue.mod directory in dir or above it). Its import of aimon.dev/gw/schema
// resolves to the schema shipped in this binary. On failure the error is an
// Errors listing every problem found.
func Load(dir string, opts ...Option) (*Generation, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, Errors{{Pos: dirPos(dir), Code: "dir", Message: fmt.Sprintf("cannot resolve the policy directory %s: %v.", dir, err)}}
	}
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		return nil, Errors{{Pos: dirPos(dir), Code: "dir", Message: "the policy directory does not exist or cannot be read; give the directory that holds the policy's .cue files."}}
	case !st.IsDir():
		return nil, Errors{{Pos: dirPos(dir), Code: "dir", Message: "the policy path is not a directory; give the directory that holds the policy's .cue files."}}
	}
	cueFiles, _ := filepath.Glob(filepath.Join(abs, "*.cue"))
	data := dataFiles(abs)
	if len(cueFiles) == 0 && len(data) == 0 {
		return nil, Errors{{Pos: dirPos(dir), Code: "dir", Message: "the policy directory has no .cue, .yaml or .json files; write a policy there, or start one with aimon-gw init."}}
	}
	root := moduleRoot(abs)
	ov := map[string]load.Source{}
	switch {
	case root == "" && onlyPins(abs, cueFiles):
		// YAML or JSON alone needs no CUE module of its own: it imports
		// nothing, and the schema comes from the binary. Nor does the
		// pins.cue that aimon-gw pin writes beside it.
		root = abs
		ov[filepath.Join(abs, "cue.mod", "module.cue")] = load.FromString("module: \"aimon-gw.local/policy@v0\"\nlanguage: version: \"v0.12.0\"\n")
	case root == "":
		return nil, Errors{{Pos: dirPos(dir), Code: "dir", Message: "the policy directory is not in a CUE module: no cue.mod in it or above it; run aimon-gw init there to start one (it writes cue.mod/ with the schema vendored)."}}
	}
	read, errs := regularFiles(abs, root)
	if len(errs) > 0 {
		return nil, errs
	}
	if err := checkVendored(root); err != nil {
		return nil, err
	}
	if len(cueFiles) == 0 {
		// A policy in YAML or JSON alone: CUE loads a package of files,
		// so an empty one stands for the package clause they lack.
		ov[filepath.Join(abs, "aimon-gw.package.cue")] = load.FromString("package policy\n")
	}
	schemaDir := filepath.Join(root, "schema")
	src := sources{}
	if module(root) != schema.Module {
		// The shipped schema, laid over a vendored copy when there is one:
		// CUE unifies the packages of cue.mod/gen and cue.mod/pkg, and the
		// schema met twice is one CUE must decide (no saved gate).
		schemaDir = filepath.Join(root, "cue.mod", "gen", filepath.FromSlash(schema.ImportPath))
		if vendored(root) {
			schemaDir = filepath.Join(root, "cue.mod", vendorDir)
		}
		schemaOverlay(schemaDir, ov, src)
	}
	c := newCompiler(abs, opts)
	c.data, c.src = data, src
	// CUE gets the bytes read once, as checked: a file swapped for a FIFO
	// since cannot block the load (rule R5).
	c.read = map[string]bool{}
	for p, b := range read {
		if _, shipped := ov[p]; !shipped && strings.HasSuffix(p, ".cue") {
			src.lay(ov, p, b)
			c.read[p] = true
		}
	}
	return timed(c.opts.ctx, dir, c.opts.timeout, func() (*Generation, error) {
		return build(&load.Config{Dir: abs, ModuleRoot: root, Overlay: ov}, schemaDir, c)
	})
}

// timed runs a load within d (no limit when d is 0), and until ctx is done
// (nil for never). A load past either is rejected with a sentence and left
// to finish on its own: CUE cannot be interrupted, and the caller must not
// wait behind it (rule R5), nor a signal to stop (SIGTERM).
func timed(ctx context.Context, dir string, d time.Duration, load func() (*Generation, error)) (*Generation, error) {
	if d <= 0 && (ctx == nil || ctx.Done() == nil) {
		return load()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	type loaded struct {
		g   *Generation
		err error
	}
	ch := make(chan loaded, 1)
	go func() {
		g, err := load()
		ch <- loaded{g, err}
	}()
	var expired <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		expired = t.C
	}
	select {
	case l := <-ch:
		return l.g, l.err
	case <-expired:
		return nil, Errors{{Pos: dirPos(dir), Code: "R5", Message: fmt.Sprintf("the policy did not load within %s, so it is rejected (a large comprehension or list.Range?); simplify it, or raise --load-timeout.", d)}}
	case <-ctx.Done():
		return nil, Errors{{Pos: dirPos(dir), Code: "R5", Message: fmt.Sprintf("the load of the policy was stopped (%v) before it finished.", context.Cause(ctx))}}
	}
}

// vendorDir is where aimon-gw init vendors the schema, below a module's
// cue.mod, so that stock CUE tools resolve its import.
var vendorDir = filepath.Join("pkg", filepath.FromSlash(schema.ImportPath))

// VendorSchema writes the shipped schema package below pkgDir (a module's
// cue.mod/pkg).
func VendorSchema(pkgDir string) error {
	return fs.WalkDir(schema.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(schema.Files, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(pkgDir, filepath.FromSlash(schema.ImportPath), filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// vendored reports whether the module has a vendored copy of the schema.
func vendored(root string) bool {
	_, err := os.Stat(filepath.Join(root, "cue.mod", vendorDir))
	return err == nil
}

// checkVendored compares a vendored copy of the schema (cue.mod/pkg) with
// the one shipped in this binary: CUE would unify the two, so a stale copy
// would change what the policy means.
func checkVendored(root string) error {
	dir := filepath.Join(root, "cue.mod", vendorDir)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	var errs Errors
	stale := func(file, why string) {
		errs = append(errs, Diagnostic{Pos: dirPos(relative(file)), Code: "schema", Message: fmt.Sprintf(
			"the vendored schema is stale: %s; this aimon-gw ships another. Delete %s and run aimon-gw init in an empty directory to copy the current one, or copy it over with the schema of this binary.", why, relative(dir))})
	}
	fs.WalkDir(schema.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, _ := fs.ReadFile(schema.Files, p)
		file := filepath.Join(dir, filepath.FromSlash(p))
		got, err := os.ReadFile(file)
		switch {
		case err != nil:
			stale(file, "it lacks "+p)
		case string(got) != string(want):
			stale(file, p+" differs from the shipped one")
		}
		return nil
	})
	// A file the binary does not ship would be unified into the schema.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".cue" {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if _, err := fs.Stat(schema.Files, filepath.ToSlash(rel)); err != nil {
			stale(p, rel+" is not part of the shipped schema")
		}
		return nil
	})
	if len(errs) > 0 {
		return errs[:1]
	}
	return nil
}

// revisionWith folds the markdown files a policy read into its revision.
func revisionWith(rev string, g *Generation) string {
	h := sha256.New()
	h.Write([]byte(rev))
	for _, ref := range g.SurfaceRefs() {
		for _, f := range g.Surfaces[ref].Files() {
			data, _ := os.ReadFile(f)
			fmt.Fprintf(h, "\x00%s\x00%d\x00", f, len(data))
			h.Write(data)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// innermost replaces each "import failed" error by the error it wraps,
// which has the imported file's own position.
func innermost(err cueerrors.Error) cueerrors.Error {
	var out cueerrors.Error
	for _, e := range cueerrors.Errors(err) {
		for {
			format, _ := e.Msg()
			inner, ok := stderrors.Unwrap(e).(cueerrors.Error)
			// Only an error in another file says more than the import line.
			if !strings.HasPrefix(format, "import failed") || !ok || inner == nil ||
				!inner.Position().IsValid() || inner.Position().Filename() == e.Position().Filename() {
				break
			}
			e = inner
		}
		out = cueerrors.Append(out, e)
	}
	return out
}

// noPackage reports the .cue files of dir that have no package clause.
func noPackage(dir string) Errors {
	var errs Errors
	files, _ := filepath.Glob(filepath.Join(dir, "*.cue"))
	for _, f := range files {
		pf, err := parser.ParseFile(f, nil, parser.PackageClauseOnly)
		if err == nil && pf.PackageName() == "" {
			errs = append(errs, Diagnostic{Pos: Position{File: relative(f), Line: 1, Col: 1}, Code: "cue",
				Message: "the file has no package clause; start it with the package of the policy's other files, such as `package policy`."})
		}
	}
	if len(errs) == 0 {
		errs = Errors{{Pos: dirPos(relative(dir)), Code: "cue", Message: "the policy's files have no package clause; start each with `package policy`."}}
	}
	return errs
}

// regularFiles reads each file CUE would read for the policy, once, opened
// non-blocking and checked on its descriptor, and reports each that is not
// a regular file (a FIFO would block the load for ever): those in dir and
// below it, in the directories up to the module root, and in cue.mod.
func regularFiles(dir, root string) (map[string][]byte, Errors) {
	var errs Errors
	read := map[string][]byte{}
	check := func(p string, d fs.DirEntry) {
		if d.IsDir() {
			return
		}
		fi, err := readRegular(p, read) // a symbolic link to a regular file is fine
		if err == nil && fi.Mode().IsRegular() {
			return
		}
		kind := "not a regular file"
		switch {
		case err != nil:
			kind = "a symbolic link that leads nowhere"
		case fi.Mode()&fs.ModeNamedPipe != 0:
			kind = "a named pipe (FIFO)"
		case fi.IsDir():
			return
		case fi.Mode()&fs.ModeSocket != 0:
			kind = "a socket"
		case fi.Mode()&fs.ModeDevice != 0:
			kind = "a device"
		}
		if err != nil && fi != nil {
			kind = fmt.Sprintf("a file that cannot be read (%v)", err)
		}
		errs = append(errs, Diagnostic{Pos: dirPos(relative(p)), Code: "R5", Message: fmt.Sprintf("%s is %s; a policy is made of regular files: remove it or make it one.", filepath.Base(p), kind)})
	}
	walk := func(top string) {
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && p != top && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			if policyFile(d.Name()) {
				check(p, d)
			}
			return nil
		})
	}
	walk(dir)
	walk(filepath.Join(root, "cue.mod"))
	for a := dir; a != root && a != filepath.Dir(a); {
		a = filepath.Dir(a)
		entries, _ := os.ReadDir(a)
		for _, e := range entries {
			if policyFile(e.Name()) {
				check(filepath.Join(a, e.Name()), e)
			}
		}
	}
	return read, errs
}

// readRegular opens p without blocking (a FIFO opens at once), and reads it
// into read when its descriptor is a regular file; fi is what p is.
func readRegular(p string, read map[string][]byte) (fi fs.FileInfo, err error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if fi, serr := os.Stat(p); serr == nil {
			return fi, nil // a socket cannot be opened: said by its kind
		}
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fi, nil
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fi, err
	}
	read[p] = b
	return fi, nil
}

// policyFile reports whether a file of this name is read for a policy.
func policyFile(name string) bool { return strings.HasSuffix(name, ".cue") || dataFile(name) }

// onlyPins reports whether the CUE files of a directory are at most the
// pins.cue that aimon-gw pin writes, which imports nothing.
func onlyPins(dir string, cueFiles []string) bool {
	return len(cueFiles) == 0 || len(cueFiles) == 1 && cueFiles[0] == filepath.Join(dir, "pins.cue")
}

// dataFile reports whether a file of this name is a policy file in YAML or
// JSON.
func dataFile(name string) bool {
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return !strings.HasPrefix(name, ".")
	}
	return false
}

// dataFiles are the YAML and JSON files of a policy directory, sorted.
func dataFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if !e.IsDir() && dataFile(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

var yamlErrRE = regexp.MustCompile(`^(?:yaml: )?(?:line (\d+): |.*?:(\d+): )(.*)$`)

// dataError places a YAML or JSON syntax error at its file and line.
func dataError(file string, err error, schemaDir string) Errors {
	if ce, ok := err.(cueerrors.Error); ok && ce.Position().IsValid() {
		return Errors(fromCUE(ce, schemaDir))
	}
	pos, msg := dirPos(relative(file)), err.Error()
	if m := yamlErrRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1] + m[2])
		pos, msg = Position{File: relative(file), Line: line, Col: 1}, m[3]
	}
	return Errors{{Pos: pos, Code: "cue", Message: msg + "; fix the file's syntax"}}
}

// extractData reads a YAML or JSON policy file as CUE syntax, with its
// own file, line and column on every value, through CUE's own encodings.
func extractData(path string) (*ast.File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if filepath.Ext(path) == ".json" {
		expr, err := cuejson.Extract(path, src)
		if err != nil {
			return nil, err
		}
		st, ok := expr.(*ast.StructLit)
		if !ok {
			return nil, cueerrors.Newf(expr.Pos(), "a JSON policy file must hold an object")
		}
		f := &ast.File{Filename: path, Decls: st.Elts}
		return f, inputSchemas(f)
	}
	f, err := cueyaml.Extract(path, src)
	if err != nil {
		return nil, err
	}
	return f, inputSchemas(f)
}

// LoadFS loads a policy shipped inside the binary: the .cue files at the top
// of fsys, laid out as a module of their own.
func LoadFS(fsys fs.FS, opts ...Option) (*Generation, error) {
	const root = "/aimon-gw.embedded/policy"
	ov := map[string]load.Source{
		root + "/cue.mod/module.cue": load.FromString("module: \"aimon.dev/embedded@v0\"\nlanguage: version: \"v0.12.0\"\n"),
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, Errors{{Code: "dir", Message: fmt.Sprintf("cannot read the embedded policy: %v.", err)}}
	}
	src := sources{}
	for _, e := range entries {
		if path.Ext(e.Name()) == ".cue" {
			data, _ := fs.ReadFile(fsys, e.Name())
			src.lay(ov, root+"/"+e.Name(), data)
		}
	}
	schemaDir := root + "/cue.mod/gen/" + schema.ImportPath
	schemaOverlay(schemaDir, ov, src)
	c := newCompiler("", opts)
	c.src = src
	return build(&load.Config{Dir: root, ModuleRoot: root, Overlay: ov}, schemaDir, c)
}

func newCompiler(dir string, opts []Option) *compiler {
	c := &compiler{dir: dir}
	for _, o := range opts {
		o(&c.opts)
	}
	return c
}

// ModuleRoot is the CUE module root of a policy directory: the directory
// with cue.mod at or above it; "" when there is none.
func ModuleRoot(dir string) string { return moduleRoot(dir) }

func moduleRoot(dir string) string {
	for {
		if st, err := os.Stat(filepath.Join(dir, "cue.mod")); err == nil && st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func module(root string) string {
	f := filepath.Join(root, "cue.mod", "module.cue")
	data, err := os.ReadFile(f)
	if err != nil {
		return ""
	}
	mf, err := modfile.ParseNonStrict(data, f)
	if err != nil {
		return ""
	}
	return mf.QualifiedModule()
}

// build loads, evaluates and compiles one policy.
func build(cfg *load.Config, schemaDir string, c *compiler) (*Generation, error) {
	whole := *c // as the caller set it up, for a load again with every tool evaluated
	c.ctx, c.lists = cuecontext.New(), cuecontext.New()
	def, err := Schema(c.ctx)
	if err != nil {
		return nil, Errors{{Code: "schema", Message: fmt.Sprintf("the shipped schema does not load: %v.", err)}}
	}
	insts := load.Instances([]string{"."}, cfg)
	inst := insts[0]
	if inst.Err == nil {
		// YAML and JSON files are unified with the package exactly as its
		// CUE files are, and checked by the same schema (rule P8).
		for _, f := range c.data {
			file, err := extractData(f)
			if err != nil {
				return nil, dataError(f, err, schemaDir)
			}
			if err := inst.AddSyntax(file); err != nil {
				return nil, Errors(fromCUE(err, schemaDir))
			}
		}
	}
	if inst.Err != nil {
		// An import that failed is reported where its own problem is, not
		// at the import line of the file that imports it.
		err := innermost(inst.Err)
		errs := Errors(fromCUE(err, schemaDir))
		if strings.Contains(err.Error(), "no package name") {
			errs = noPackage(cfg.Dir)
		}
		for i := range errs {
			if !errs[i].Pos.IsValid() && strings.Contains(errs[i].Message, "module.cue") {
				errs[i].Pos = Position{File: relative(filepath.Join(cfg.ModuleRoot, "cue.mod", "module.cue")), Line: 1, Col: 1}
				if strings.Contains(errs[i].Message, "language version") {
					errs[i].Message += `; add language: version: "v0.12.0" to it`
				}
			}
		}
		return nil, errs
	}
	if errs := externs(inst); len(errs) > 0 {
		return nil, errs
	}
	c.def, c.schemaDir, c.files = def, schemaDir, inst.Files
	c.decls = toolDecls(c.files, c.src)
	if c.opts.reuse {
		c.reuse = newReuser(c.opts.prev, inst, cfg.ModuleRoot, schemaDir, c.dir, c.src)
	}
	if !c.whole {
		// CUE builds the syntax without the tools it need not evaluate
		// (elide.go); everything else reads the files as parsed.
		inst.Files, c.elided = c.elide(c.files)
	}
	built := c.ctx.BuildInstance(inst)
	inst.Files = c.files
	// v.Err would give only the first error; Validate gives them all.
	v := def.LookupPath(cue.MakePath(cue.Def("Policy"))).Unify(built)
	var errs Errors
	if err := v.Validate(); err != nil {
		// Compile what can be compiled anyway, so that one load reports
		// every problem rather than the first layer of them.
		errs = suggestFields(fromCUE(err, schemaDir), v)
	}
	revision, inputs, err := revisionOf(inst, cfg.ModuleRoot, c.src)
	if err != nil {
		return nil, Errors{{Pos: dirPos(cfg.Dir), Code: "dir", Message: fmt.Sprintf("cannot compute the policy's revision: %v.", err)}}
	}
	g := newGeneration(Plan{Dir: c.dir, Revision: revision}, c)
	c.compile(g, v)
	if c.elided != nil && (c.elided.failed || len(errs) > 0 || len(c.errs) > 0) {
		// Each tool says its own problems, at its own place.
		whole.whole = true
		return build(cfg, schemaDir, &whole)
	}
	if c.reuse != nil {
		// The next load takes what this one compiled; none holds the last.
		g.reuse, c.reuse = c.reuse.next, nil
	}
	g.inputNotes = inputTypeNames(g)
	if errs = merge(errs, c.errs); len(errs) > 0 {
		// Every problem in one run: what compiled beside the errors is
		// reported too, warnings included.
		errs = merge(errs, c.warnings)
		errs = merge(errs, vetChecks(g, c.warnings))
		return nil, Errors(OnePerPlace(errs))
	}
	sortDiagnostics(c.warnings)
	g.Warnings = c.warnings
	if len(g.Dirs) > 0 {
		g.Revision = revisionWith(g.Revision, g)
	}
	// Files the binary overlays (the shipped schema) are not read from disk.
	inputs = slices.DeleteFunc(inputs, func(f string) bool { _, ok := cfg.Overlay[f]; return ok && !c.read[f] })
	g.Inputs = append(inputs, c.data...)
	for _, ref := range g.SurfaceRefs() {
		g.Inputs = append(g.Inputs, g.Surfaces[ref].Files()...)
	}
	slices.Sort(g.Inputs)
	g.Inputs = slices.Compact(g.Inputs)
	g.release()
	return g, nil
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

// merge appends more to errs, leaving out what errs already says.
func merge(errs, more Errors) Errors {
	seen := map[Position]bool{}
	for _, d := range errs {
		seen[d.Pos] = true
	}
	for _, d := range more {
		if !d.Pos.IsValid() || !seen[d.Pos] {
			errs = append(errs, d)
		}
	}
	return errs
}

// externs refuses files that take values from outside CUE (@extern, such
// as @extern(embed)): what they read is no file the load reports as its
// input, so the revision, the load cache's record, the watcher and a
// reload's reuse would all miss an edit of it (rule R3).
func externs(inst *cuebuild.Instance) Errors {
	var errs Errors
	seen := map[*cuebuild.Instance]bool{}
	var walk func(*cuebuild.Instance)
	walk = func(i *cuebuild.Instance) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, f := range i.Files {
			for _, d := range f.Decls {
				if a, ok := d.(*ast.Attribute); ok {
					if key, _ := a.Split(); key == "extern" {
						errs = append(errs, Diagnostic{Pos: position(a.Pos()), Code: rule.R3, Message: "the policy takes values from outside CUE (" + a.Text + "), which a reload, the load cache and the watcher cannot follow; write the data in a .cue, .yaml or .json file of the policy directory instead."})
					}
				}
			}
		}
		for _, imp := range i.Imports {
			walk(imp)
		}
	}
	walk(inst)
	return errs
}

// revisionOf identifies what a policy was built from: every file CUE parsed
// for it, its imports' included (a policy may import packages of its own
// module), as parsed rather than re-read, so the revision always matches
// what was loaded: the bytes laid over for CUE where src has them, the
// syntax formatted otherwise (a YAML file's, a package CUE read itself).
func revisionOf(inst *cuebuild.Instance, root string, src sources) (rev string, files []string, err error) {
	h := sha256.New()
	seen := map[*cuebuild.Instance]bool{}
	var walk func(*cuebuild.Instance) error
	walk = func(i *cuebuild.Instance) error {
		if seen[i] {
			return nil
		}
		seen[i] = true
		parsed := slices.Clone(i.Files)
		sort.Slice(parsed, func(a, b int) bool { return parsed[a].Filename < parsed[b].Filename })
		for _, f := range parsed {
			text, err := src.text(f)
			if err != nil {
				return err
			}
			name := f.Filename
			if filepath.IsAbs(name) {
				files = append(files, name)
			}
			if rel, err := filepath.Rel(root, name); err == nil {
				name = rel
			}
			fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(name), len(text))
			h.Write(text)
		}
		for _, imp := range i.Imports {
			if err := walk(imp); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(inst); err != nil {
		return "", nil, err
	}
	// The module file decides the language version and dependencies.
	mf := filepath.Join(root, "cue.mod", "module.cue")
	if data, err := os.ReadFile(mf); err == nil {
		fmt.Fprintf(h, "cue.mod/module.cue\x00%d\x00", len(data))
		h.Write(data)
		files = append(files, mf)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], files, nil
}
