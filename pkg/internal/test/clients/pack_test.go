package clients_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The consumer's two programs: each loads the package one way, checks the error classes, and
// calls the live service through it.
const (
	consumerCJS = `const { MateMemory, MateMemoryError, ConnectionError, TimeoutError } = require("@matememory/client");
const mem = new MateMemory({ baseUrl: process.env.MATE_URL, apiKey: process.env.MATE_API_KEY });
mem.tools("en").then((tools) => console.log(JSON.stringify({ kind: "cjs", tools: tools.length,
  classes: new TimeoutError("GET", "/", 1) instanceof ConnectionError && !(new ConnectionError("GET", "/", "x") instanceof MateMemoryError) })));
`
	consumerESM = `import { MateMemory, MateMemoryError, ConnectionError, TimeoutError } from "@matememory/client";
const mem = new MateMemory({ baseUrl: process.env.MATE_URL, apiKey: process.env.MATE_API_KEY });
const tools = await mem.tools("en");
console.log(JSON.stringify({ kind: "esm", tools: tools.length,
  classes: new TimeoutError("GET", "/", 1) instanceof ConnectionError && !(new ConnectionError("GET", "/", "x") instanceof MateMemoryError) }));
`
	// Type-checked as a consumer would, with Node's resolution: each file picks its
	// condition's declarations.
	consumerTypes = `import { MateMemory, type ImportReport } from "@matememory/client";
const r: Promise<ImportReport> = new MateMemory({ baseUrl: "http://x" }).importAgent(1, "", { dryRun: true });
void r;
`
)

// packageStory packs the TypeScript client as npm would publish it (npm pack runs the
// prepare script, which builds dist/) and checks the tarball holds both builds and their
// declarations, then installs it the way npm lays a package out (node_modules/@matememory/client,
// openapi-fetch beside it) and loads it with require and with import, each calling the live
// service, and type-checks a consumer of each kind.
func packageStory(t *testing.T, dir string, svc service) {
	dest := t.TempDir()
	out := run(t, dir, os.Environ(), "npm", "pack", "--json", "--pack-destination", dest)
	var packed []struct {
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, out)
	}
	var files []string
	for _, f := range packed[0].Files {
		files = append(files, f.Path)
	}
	for _, want := range []string{"package.json", "LICENSE", "README.md", "dist/src/index.js", "dist/src/index.d.ts", "dist/src/errors.js",
		"dist/cjs/index.js", "dist/cjs/index.d.ts", "dist/cjs/package.json", "src/index.ts"} {
		if !slices.Contains(files, want) {
			t.Errorf("npm pack has no %s; it holds %v", want, files)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "dist/test/") || strings.HasPrefix(f, "node_modules/") || strings.HasPrefix(f, "test/") {
			t.Errorf("npm pack holds %s, which is not the library", f)
		}
	}

	consumer := t.TempDir()
	pkg := filepath.Join(consumer, "node_modules", "@matememory", "client")
	untar(t, filepath.Join(dest, packed[0].Filename), pkg)
	if err := os.Symlink(filepath.Join(dir, "node_modules", "openapi-fetch"), filepath.Join(consumer, "node_modules", "openapi-fetch")); err != nil {
		t.Fatal(err)
	}
	tsconfig := `{"compilerOptions": {"strict": true, "noEmit": true, "module": "node16", "moduleResolution": "node16", "lib": ["ES2022", "DOM"],
		"types": [], "skipLibCheck": true}, "files": ["check.cts", "check.mts"]}`
	for name, src := range map[string]string{"package.json": `{"name":"consumer","private":true}`, "check.cjs": consumerCJS, "check.mjs": consumerESM,
		"check.cts": consumerTypes, "check.mts": consumerTypes, "tsconfig.json": tsconfig} {
		if err := os.WriteFile(filepath.Join(consumer, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for prog, kind := range map[string]string{"check.cjs": "cjs", "check.mjs": "esm"} {
		got := run(t, consumer, svc.env(tsAgent), "node", prog)
		var res struct {
			Kind    string `json:"kind"`
			Tools   int    `json:"tools"`
			Classes bool   `json:"classes"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(got)), &res); err != nil || res.Tools < 3 || !res.Classes || res.Kind != kind {
			t.Errorf("%s through the packed package: %s (%v)", prog, got, err)
		}
	}
	run(t, consumer, os.Environ(), filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", "tsconfig.json")
}

// untar extracts an npm tarball's package/ folder into dst.
func untar(t *testing.T, tgz, dst string) {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(h.Name, "package/")
		if !ok || h.Typeflag != tar.TypeReg || strings.Contains(rel, "..") {
			continue
		}
		p := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLicenses: the client packages carry the repository's LICENSE, and declare its license.
func TestLicenses(t *testing.T) {
	root, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(root), "MIT License\n") {
		t.Fatalf("LICENSE is not the MIT license: %.40q", root)
	}
	for _, f := range []string{"typescript/LICENSE", "python/LICENSE"} {
		if b, err := os.ReadFile(f); err != nil || string(b) != string(root) {
			t.Errorf("clients/%s differs from the repository's LICENSE (%v)", f, err)
		}
	}
	var pkg struct {
		License string   `json:"license"`
		Files   []string `json:"files"`
	}
	b, _ := os.ReadFile("typescript/package.json")
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.License != "MIT" || !slices.Contains(pkg.Files, "LICENSE") {
		t.Errorf("typescript/package.json: license %q, files %v (%v)", pkg.License, pkg.Files, err)
	}
	if py, _ := os.ReadFile("python/pyproject.toml"); !strings.Contains(string(py), `license = { text = "MIT" }`) {
		t.Errorf("python/pyproject.toml does not declare MIT")
	}
}
