// Package npmtest installs npm packages pinned by a committed package-lock.json for tests
// that hold MateMemory to third-party JavaScript tools.
package npmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Install copies files (package.json, package-lock.json and whatever else the test runs;
// slash-separated paths relative to src, folders kept) from src into a temporary directory,
// runs npm ci there and returns the directory. Without node and npm the test is skipped,
// except under CI=true, where it fails; with -short it is skipped.
func Install(t testing.TB, src string, files ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("installs npm packages")
	}
	npm, err := exec.LookPath("npm")
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are required under CI: %v", err)
		}
		t.Skipf("node or npm not installed: %v", err)
	}
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}
