package clientdeps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const module = "github.com/matememory/matememory"

// lib is one library chat services import and what it may pull in.
type lib struct {
	pkg string // import path below the module
	// allowed are the import-path prefixes (beyond the standard library) that the library,
	// its tests and the tests of every MateMemory package it imports may use.
	allowed []string
	// maxModules bounds the modules an out-of-tree program importing only this library
	// downloads with an empty module cache (MateMemory itself is a replace, not a download).
	maxModules int
	// needsProxy is set when downloads are expected, so the proxy must be reachable.
	needsProxy bool
}

// The server modules no client library may reach, by import or by download.
var serverModules = []string{
	"github.com/nats-io/nats-server", "gorm.io/", "modernc.org/sqlite", "github.com/glebarez",
	"github.com/go-sql-driver/mysql", "github.com/openai/openai-go", "github.com/modelcontextprotocol",
	"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters",
}

func isServer(path string) bool {
	return slices.ContainsFunc(serverModules, func(s string) bool { return strings.HasPrefix(path, s) })
}

var libs = []lib{
	// pkg/api (the wire types) and pkg/internal/fault (the one invalid-input error, which
	// event.InvalidError is) are standard library only.
	{pkg: "pkg/client", allowed: []string{module + "/pkg/client", module + "/pkg/event", module + "/pkg/api", module + "/pkg/internal/fault"}, maxModules: 0},
	{pkg: "pkg/event", allowed: []string{module + "/pkg/event", module + "/pkg/internal/fault"}, maxModules: 0},
	{pkg: "pkg/api", allowed: []string{module + "/pkg/api"}, maxModules: 0},
	{
		pkg: "pkg/eventpub",
		allowed: []string{
			module + "/pkg/eventpub", module + "/pkg/event", module + "/pkg/internal/fault", module + "/pkg/internal/tracing",
			// nats.go and watermill with their dependencies.
			"github.com/nats-io/nats.go", "github.com/nats-io/nkeys", "github.com/nats-io/nuid",
			"github.com/ThreeDotsLabs/watermill", "github.com/ThreeDotsLabs/watermill-nats",
			"github.com/klauspost/compress", "golang.org/x/crypto", "golang.org/x/sys",
			"github.com/google/uuid", "github.com/lithammer/shortuuid", "github.com/oklog/ulid", "github.com/pkg/errors",
			// The OpenTelemetry API that carries trace context on the messages (not the SDK).
			"go.opentelemetry.io/otel/", "github.com/cespare/xxhash",
		},
		// Measured 2026-12-01: 23 modules, 53 MB of zips (nats.go, watermill, watermill-nats,
		// the otel API and what their own tests import, such as testify). Before
		// pkg/eventpub's and pkg/internal/tracing's JetStream tests moved out: 33 modules with
		// nats-server and the otel SDK.
		maxModules: 23, needsProxy: true,
	},
}

// skipAbsent skips the case of a library that is not in the tree (yet).
func skipAbsent(t *testing.T, pkg string) {
	t.Helper()
	root := filepath.Dir(goList(t, "-m", "-f", "{{.GoMod}}")[0])
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(pkg))); os.IsNotExist(err) {
		t.Skipf("%s is not in the tree", pkg)
	}
}

func goTool(t *testing.T) string {
	t.Helper()
	g, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	return g
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command(goTool(t), append([]string{"list"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Fields(string(out))
}

// TestImportClosure holds each library, its tests and the tests of every MateMemory package
// it imports (what go mod tidy reads) to its allowed imports.
func TestImportClosure(t *testing.T) {
	for _, l := range libs {
		t.Run(l.pkg, func(t *testing.T) {
			skipAbsent(t, l.pkg)
			var own []string
			for _, p := range goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"/"+l.pkg) {
				if strings.HasPrefix(p, module+"/") {
					own = append(own, p)
				}
			}
			args := append([]string{"-deps", "-test", "-f", "{{if not .Standard}}{{.ImportPath}}{{if .ForTest}} (test of {{.ForTest}}){{end}}{{end}}"}, own...)
			cmd := exec.Command(goTool(t), append([]string{"list"}, args...)...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list %v: %v", args, err)
			}
			var bad []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				p, _, _ := strings.Cut(line, " ")
				p = strings.TrimSuffix(strings.TrimSuffix(p, ".test"), "_test")
				if p == "" || !isServer(p) && slices.ContainsFunc(l.allowed, func(a string) bool { return p == a || strings.HasPrefix(p, strings.TrimSuffix(a, "/")+"/") }) {
					continue
				}
				bad = append(bad, line)
			}
			if len(bad) > 0 {
				t.Errorf("%s, its tests or the tests of the MateMemory packages it imports (%v) reach %d packages outside %v:\n%s",
					l.pkg, own, len(bad), l.allowed, strings.Join(bad, "\n"))
			}
		})
	}
}

// TestOutOfTreeModuleDownloads builds a real program outside the repository that imports
// one library, with an empty module cache, as a chat service's developer would (go mod
// tidy, go build), and counts the modules it downloads.
func TestOutOfTreeModuleDownloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with an empty module cache; skipped with -short")
	}
	root := filepath.Dir(goList(t, "-m", "-f", "{{.GoMod}}")[0])
	goVersion := goList(t, "-m", "-f", "{{.GoVersion}}")[0]
	for _, l := range libs {
		t.Run(l.pkg, func(t *testing.T) {
			skipAbsent(t, l.pkg)
			// CI reaches the module proxy: there the case always runs (a proxy that does not
			// answer fails it in go mod tidy, with go's own message). Elsewhere it is skipped
			// when the proxy does not answer.
			if l.needsProxy && os.Getenv("CI") != "true" {
				if err := proxyReachable(t); err != nil {
					t.Skipf("this case downloads nats.go and watermill, and the Go module proxy is unreachable: %v", err)
				}
			}
			dir, cache := t.TempDir(), t.TempDir()
			gomod := fmt.Sprintf("module example.com/chatservice\n\ngo %s\n\nrequire %s v0.0.0\n\nreplace %s => %s\n", goVersion, module, module, root)
			src := fmt.Sprintf("package main\n\nimport _ %q\n\nfunc main() {}\n", module+"/"+l.pkg)
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "GOMODCACHE="+cache, "GOFLAGS=-mod=mod -modcacherw", "GOWORK=off", "GOTOOLCHAIN=local")
			for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				cmd := exec.CommandContext(ctx, goTool(t), args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					mods, _ := downloaded(cache)
					t.Fatalf("go %s for a program importing only %s: %v (after downloading %d modules: %v)\n%s",
						strings.Join(args, " "), l.pkg, err, len(mods), mods, out)
				}
			}
			mods, size := downloaded(cache)
			t.Logf("a program importing only %s downloads %d modules, %.1f MB of zips: %v", l.pkg, len(mods), float64(size)/1e6, mods)
			if len(mods) > l.maxModules {
				t.Errorf("a program importing only %s downloads %d modules (%.0f MB of zips), at most %d expected",
					l.pkg, len(mods), float64(size)/1e6, l.maxModules)
			}
			for _, m := range mods {
				if isServer(m) {
					t.Errorf("a program importing only %s downloads the server module %s", l.pkg, m)
				}
			}
		})
	}
}

// downloaded lists the modules whose zips are in the module cache (module@version) and their
// total size.
func downloaded(cache string) (mods []string, size int64) {
	base := filepath.Join(cache, "cache", "download")
	_ = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".zip") {
			return nil
		}
		rel, _ := filepath.Rel(base, path)
		mod, ver, ok := strings.Cut(filepath.ToSlash(rel), "/@v/")
		if !ok {
			return nil
		}
		if info, err := d.Info(); err == nil {
			size += info.Size()
		}
		mods = append(mods, unescape(mod)+"@"+strings.TrimSuffix(ver, ".zip"))
		return nil
	})
	slices.Sort(mods)
	return mods, size
}

// unescape undoes the module cache's case encoding ("!x" for "X").
func unescape(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '!' && i+1 < len(p) {
			i++
			b.WriteString(strings.ToUpper(p[i : i+1]))
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// proxyReachable asks the first proxy of GOPROXY for a module list.
func proxyReachable(t *testing.T) error {
	cmd := exec.Command(goTool(t), "env", "GOPROXY")
	raw, err := cmd.Output()
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(raw)), ",")
	first, _, _ = strings.Cut(first, "|")
	if !strings.HasPrefix(first, "http") {
		return fmt.Errorf("GOPROXY=%s has no HTTP proxy first", strings.TrimSpace(string(raw)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(first, "/")+"/github.com/nats-io/nats.go/@v/list", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(first + ": " + resp.Status)
	}
	return nil
}
