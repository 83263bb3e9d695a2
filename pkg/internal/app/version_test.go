package app

import (
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// Without a version from the link (make build, the image), the version is the one the go
// command embedded: the module's, or the commit it stamped (make run), never a bare "dev"
// when there is one.
func TestVersionFromTheBuild(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs", Value: "git"}, debug.BuildSetting{Key: "vcs.revision", Value: rev})
		if modified != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return bi
	}
	for _, c := range []struct {
		name, stamped string
		bi            *debug.BuildInfo
		want          string
	}{
		{"the link's stamp wins", "v1.2.3", vcs("5c955c5f0a1b2c3d4e5f60718293a4b5c6d7e8f9", "true"), "v1.2.3"},
		{"go run with the VCS stamp", "dev", vcs("5c955c5f0a1b2c3d4e5f60718293a4b5c6d7e8f9", "false"), "5c955c5f0a1b"},
		{"uncommitted changes", "dev", vcs("5c955c5f0a1b2c3d4e5f60718293a4b5c6d7e8f9", "true"), "5c955c5f0a1b-dirty"},
		{"go install of a tagged module", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
		{"nothing embedded", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "dev", nil, "dev"},
	} {
		got := versionOf(c.stamped, func() (*debug.BuildInfo, bool) { return c.bi, c.bi != nil })
		if got != c.want {
			t.Errorf("%s: version %q, want %q", c.name, got, c.want)
		}
	}
	// make run asks the go command for the VCS stamp (go run leaves it out by default).
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^run:.*\n\t\$\(GO\) run -buildvcs=true `).Match(mk) {
		t.Fatal("make run does not pass -buildvcs=true to go run: its version would be dev")
	}
}

// Every command's help names the binary's commands as the docs do (api replay), not
// another binary's.
func TestReplayHelpNamesTheCommand(t *testing.T) {
	code, out, _ := runCLI(t, "api", []string{"PATH=/bin"}, "replay", "--help")
	if code != 0 || !strings.Contains(out, "usage: api replay") || strings.Contains(out, "usage: summarizer") {
		t.Fatalf("replay --help: exit %d:\n%s", code, out)
	}
}
