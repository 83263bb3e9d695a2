package layout

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/matememory/matememory"

// core are the packages that hold application logic only: they, and every MateMemory
// package they import, import none of forbidden. The redesign (issue 24) is still moving
// these out of their adapters, and they join the list when they hold:
// pkg/internal/workspace, conversation, cronjob, ledger (their gorm queries), window
// (its KV cache, gorm and HTTP), recall (its ranking, apart from the indexer and the
// store), summarizer's and emergence's extraction steps, tool, bundle.
var core = []string{
	"pkg/event",
	"pkg/internal/config",
	"pkg/internal/guard",
	"pkg/internal/memedit",
	"pkg/internal/prompt",
	"pkg/internal/promptsafe",
	"pkg/internal/ratelog",
	"pkg/internal/recall/chunk",
	"pkg/internal/recall/embed",
	"pkg/internal/recall/lexical",
	"pkg/internal/tokens",
}

// forbidden are the adapters' libraries: the HTTP server, NATS and the database.
var forbidden = []string{"net/http", "github.com/nats-io/nats.go", "gorm.io/gorm"}

// public are the packages outside pkg/internal: the contract outsiders import.
var public = []string{"pkg/event", "pkg/eventpub", "pkg/client", "pkg/api", "pkg/app"}

// contract are public names that are for outsiders although no outside user in this
// repository selects them yet (chat services spell the values as strings, or do not use the
// option); the reason says why they stay.
var contract = map[string]string{
	"event.TriggerCron":            "a value of the event's triggerSource",
	"event.TurnCompleted":          "a value of the event's turnStatus",
	"event.TurnStopped":            "a value of the event's turnStatus",
	"event.MaxConversationIDBytes": "the limit of the event's conversationId",
	"eventpub.ErrTooLarge":         "the error a chat service gets for an event over the stream's limit",
	"eventpub.WithTracing":         "the option that carries a chat service's trace context on its events",
	"client.MemoryHit":             "one hit of SearchMemory's result",
	"event.StreamAgentTriggers":    "the stream a chat service consumes the agents' task triggers from",
	"api.DeadLetterInfo":           "embedded in client.DeadLetter, whose fields it holds",
	"event.SubjectAgentTrigger":    "the subject of those triggers",
	"client.StatusFailed":          "a run status a caller compares Run.Status with",
}

// moving are public names only internal code uses that the redesign (issue 24) is still
// moving under pkg/internal or deciding about. An entry goes when its name stops being
// internal-only; a new internal-only name fails the test.
var moving = map[string]string{
	"event.SubjectCompleted":   "the subject catalogue of the message runtime (bus/names.go repeats it)",
	"event.SubjectSummarize":   "the subject catalogue of the message runtime",
	"event.CompletedSubject":   "the subject catalogue of the message runtime",
	"event.DecodeCompletedMsg": "the summarizer's handler on the message runtime",
	"event.DecodeSummarize":    "the summarize request is an internal message",
	"event.Outcome":            "the summarize request's answer is an internal message",
	"event.ValidateToolCalls":  "intake validates an event once",
}

type listed struct {
	ImportPath string
	Dir        string
	Imports    []string
	Deps       []string
	Standard   bool
	Error      *struct{ Err string }
}

// goList runs go list -json over pkgs (import paths below the module) and decodes each.
func goList(t *testing.T, args []string, pkgs ...string) []listed {
	t.Helper()
	full := make([]string, len(pkgs))
	for k, p := range pkgs {
		full[k] = module + "/" + p
	}
	cmd := exec.Command("go", append(append([]string{"list", "-e", "-json"}, args...), full...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var all []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var l listed
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		all = append(all, l)
	}
	return all
}

func isForbidden(imp string) bool {
	return slices.ContainsFunc(forbidden, func(f string) bool { return imp == f || strings.HasPrefix(imp, f+"/") })
}

// coreViolations are the forbidden imports of each core package and of every MateMemory
// package it reaches, as "core: package imports library". A third-party library's own
// imports do not count: the rule is about our code's dependencies on the adapters.
func coreViolations(t *testing.T, pkgs []string) []string {
	t.Helper()
	var bad []string
	for _, c := range goList(t, nil, pkgs...) {
		if c.Error != nil {
			bad = append(bad, fmt.Sprintf("%s: %s", c.ImportPath, c.Error.Err))
			continue
		}
		own := []string{c.ImportPath}
		for _, d := range c.Deps {
			if strings.HasPrefix(d, module+"/") {
				own = append(own, d)
			}
		}
		for _, o := range goList(t, nil, trimModule(own)...) {
			for _, imp := range o.Imports {
				if isForbidden(imp) {
					bad = append(bad, fmt.Sprintf("%s: %s imports %s", trimModule([]string{c.ImportPath})[0], trimModule([]string{o.ImportPath})[0], imp))
				}
			}
		}
	}
	return bad
}

func trimModule(paths []string) []string {
	out := make([]string, len(paths))
	for k, p := range paths {
		out[k] = strings.TrimPrefix(p, module+"/")
	}
	return out
}

// TestCoreImportsNoAdapter holds each core package to its rule: no net/http, NATS or gorm,
// not even through another MateMemory package.
func TestCoreImportsNoAdapter(t *testing.T) {
	if bad := coreViolations(t, core); len(bad) > 0 {
		t.Errorf("core packages reach an adapter's library (%v); move the code that needs it to the package's port or adapter:\n  %s",
			forbidden, strings.Join(bad, "\n  "))
	}
}

// TestCoreCheckFails shows the check failing: a package that imports net/http through
// another MateMemory package (pkg/internal/panics) is reported.
func TestCoreCheckFails(t *testing.T) {
	bad := coreViolations(t, []string{"pkg/internal/llmhealth"})
	if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, "imports net/http") }) {
		t.Fatalf("llmhealth reaches net/http through pkg/internal/llm, but the check found %v", bad)
	}
}

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// exported are the exported top-level names of the package in dir (its non-test files).
func exported(t *testing.T, dir string) map[string]string {
	t.Helper()
	names := map[string]string{}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		add := func(n *ast.Ident) {
			if n.IsExported() {
				names[n.Name] = fmt.Sprintf("%s:%d", e.Name(), fset.Position(n.Pos()).Line)
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					add(d.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(s.Name)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n)
						}
					}
				}
			}
		}
	}
	return names
}

// uses counts, for each import path of the module, the names other files select from it,
// split into internal users (pkg/internal outside pkg/internal/test) and outside users
// (cmd/, the contract's tests under pkg/internal/test, the public packages and their
// tests).
type uses map[string]map[string]*count

type count struct{ internal, outside []string }

func scanUses(t *testing.T, dir string) uses {
	t.Helper()
	u := uses{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return nil
		}
		imported := map[string]string{}
		for _, im := range f.Imports {
			ip := strings.Trim(im.Path.Value, `"`)
			if !strings.HasPrefix(ip, module+"/") {
				continue
			}
			name := ip[strings.LastIndex(ip, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imported[name] = ip
		}
		if len(imported) == 0 {
			return nil
		}
		f, err = parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil
		}
		internal := strings.HasPrefix(rel, "pkg/internal/") && !strings.HasPrefix(rel, "pkg/internal/test/")
		ast.Inspect(f, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := se.X.(*ast.Ident)
			if !ok {
				return true
			}
			ip, ok := imported[x.Name]
			if !ok {
				return true
			}
			if u[ip] == nil {
				u[ip] = map[string]*count{}
			}
			c := u[ip][se.Sel.Name]
			if c == nil {
				c = &count{}
				u[ip][se.Sel.Name] = c
			}
			if internal {
				c.internal = append(c.internal, rel)
			} else {
				c.outside = append(c.outside, rel)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// internalOnly are the exported names of the public package pkg that internal code uses
// and no outside user does: they belong in pkg/internal.
func internalOnly(t *testing.T, dir, pkg string, u uses) []string {
	t.Helper()
	var bad []string
	docs := docsText(t, dir)
	for name, at := range exported(t, filepath.Join(dir, pkg)) {
		c := u[module+"/"+pkg][name]
		qualified := filepath.Base(pkg) + "." + name
		if c != nil && len(c.internal) > 0 && len(c.outside) == 0 && !strings.Contains(docs, qualified) {
			bad = append(bad, fmt.Sprintf("%s (%s/%s), used only by %s", qualified, pkg, at, strings.Join(slices.Compact(c.internal), ", ")))
		}
	}
	sort.Strings(bad)
	return bad
}

// docsText is the text of README.md and docs/*.md: a name they show as pkg.Name is for
// outsiders.
func docsText(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	var b strings.Builder
	for _, f := range append(files, filepath.Join(dir, "README.md")) {
		raw, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		b.Write(raw)
	}
	return b.String()
}

// TestPublicExportsOnlyForOutsiders holds the public packages to their purpose: a name they
// export is there for outside users (cmd/, chat services, the contract's tests), not for
// internal code alone.
func TestPublicExportsOnlyForOutsiders(t *testing.T) {
	dir := root(t)
	u := scanUses(t, dir)
	for _, pkg := range public {
		t.Run(pkg, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, pkg)); os.IsNotExist(err) {
				t.Skipf("%s does not exist yet", pkg)
			}
			flagged := map[string]bool{}
			var bad []string
			for _, b := range internalOnly(t, dir, pkg, u) {
				name, _, _ := strings.Cut(b, " ")
				flagged[name] = true
				if contract[name] == "" && moving[name] == "" {
					bad = append(bad, b)
				}
			}
			if len(bad) > 0 {
				t.Errorf("%s exports names that only internal code uses; move them under pkg/internal or unexport them:\n  %s", pkg, strings.Join(bad, "\n  "))
			}
			prefix := filepath.Base(pkg) + "."
			for _, list := range []map[string]string{contract, moving} {
				for name := range list {
					if strings.HasPrefix(name, prefix) && !flagged[name] {
						t.Errorf("%s is listed as internal-only in layout_test.go but no longer is (moved, removed, or used from outside): take it off the list", name)
					}
				}
			}
		})
	}
}

// TestPublicCheckFails shows the export check failing: a public package's name that only
// pkg/internal code selects is reported.
func TestPublicCheckFails(t *testing.T) {
	u := uses{module + "/pkg/event": {"DecodeCompletedMsg": {internal: []string{"pkg/internal/x/x.go"}}}}
	bad := internalOnly(t, root(t), "pkg/event", u)
	if !slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, "event.DecodeCompletedMsg ") }) {
		t.Fatalf("event.DecodeCompletedMsg, used only by internal code, is not reported: %v", bad)
	}
}
