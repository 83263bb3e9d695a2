package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, target string, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(target, args, strings.NewReader(""), &out, &errOut, env)
	return code, out.String(), errOut.String()
}

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	env := []string{"MATE_DATA_DIR=" + dir, "PATH=/bin"}

	code, out, _ := runCLI(t, "api", env, "--help")
	for _, want := range []string{"migrate", "replay", "mcp-stdio", "completion", "--version", "--target", "--config"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("--help: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if code, out, _ := runCLI(t, "summarizer", env, "--version"); code != 0 || !strings.Contains(out, version()) {
		t.Fatalf("--version: exit %d %q", code, out)
	}
	// Help of a subcommand exits 0 and does nothing: no database is created or migrated.
	if code, out, _ := runCLI(t, "api", env, "migrate", "-h"); code != 0 || !strings.Contains(out, "status") {
		t.Fatalf("migrate -h: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "matememory.db")); !os.IsNotExist(err) {
		t.Fatalf("migrate -h touched the database (%v)", err)
	}
	if code, out, _ := runCLI(t, "summarizer", env, "replay", "--help"); code != 0 || !strings.Contains(out, "-dry-run") {
		t.Fatalf("replay --help: exit %d:\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "api", env, "mcp-stdio", "-h"); code != 0 || !strings.Contains(out, "-agent") {
		t.Fatalf("mcp-stdio -h: exit %d:\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "api", env, "completion", "bash"); code != 0 || !strings.Contains(out, "bash completion") {
		t.Fatalf("completion bash: exit %d:\n%.200s", code, out)
	}
	// Bad usage exits 2 and says what was wrong.
	if code, _, errOut := runCLI(t, "api", env, "bogus"); code != 2 || !strings.Contains(errOut, `unknown command "bogus"`) {
		t.Fatalf("unknown command: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "api", env, "--bogus"); code != 2 || !strings.Contains(errOut, "unknown flag: --bogus") {
		t.Fatalf("unknown flag: exit %d %q", code, errOut)
	}
	// Go-style single-dash flags still work.
	if code, _, errOut := runCLI(t, "api", env, "-config", filepath.Join(dir, "missing.yaml"), "migrate", "status"); code != 2 || !strings.Contains(errOut, "read config file") {
		t.Fatalf("-config: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "api", env, "-target=nope"); code != 2 || !strings.Contains(errOut, `"nope" is not a part`) {
		t.Fatalf("-target=nope: exit %d %q", code, errOut)
	}

	// A misspelt MATE_ variable is warned about, with the setting it probably meant.
	code, out, errOut := runCLI(t, "api", append(env, "MATE_MEMORY_COOLDOWN_MINUTE=3", "MATE_LOG_FORMAT=json"), "migrate", "status")
	if code != 0 || !strings.Contains(out, "pending") {
		t.Fatalf("migrate status: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, `"level":"WARN"`) || !strings.Contains(errOut, `"name":"MATE_MEMORY_COOLDOWN_MINUTE"`) ||
		!strings.Contains(errOut, `"did you mean":"MATE_MEMORY_COOLDOWN_MINUTES"`) {
		t.Fatalf("no JSON warning about the misspelt variable:\n%s", errOut)
	}
}

func TestGoStyleFlags(t *testing.T) {
	got := strings.Join(goStyleFlags([]string{"-config", "x.yaml", "-target=all", "-h", "-v", "--dry-run", "-agent", "1", "--", "-keep"}), " ")
	if want := "--config x.yaml --target=all -h -v --dry-run --agent 1 -- -keep"; got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
}
