package cluster

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The rolling-upgrade test needs an old commit that a shallow clone (CI's may be one) does
// not hold: ensureCommit fetches it from the clone's origin.
func TestEnsureCommitDeepensAShallowClone(t *testing.T) {
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	origin, clone := filepath.Join(t.TempDir(), "origin"), filepath.Join(t.TempDir(), "clone")
	git(".", "init", "--quiet", origin)
	for _, m := range []string{"old release", "new tree"} {
		git(origin, "commit", "--quiet", "--allow-empty", "-m", m)
	}
	old := git(origin, "rev-parse", "HEAD~1")
	git(".", "clone", "--quiet", "--depth", "1", "file://"+origin, clone)
	if err := exec.Command("git", "-C", clone, "cat-file", "-e", old+"^{commit}").Run(); err == nil {
		t.Fatal("the shallow clone already has the old commit: the test would prove nothing")
	}
	if err := ensureCommit(t, clone, old); err != nil {
		t.Fatalf("ensureCommit in a shallow clone: %v", err)
	}
	// A missing commit that the origin does not have either is an error, not a pass.
	if err := ensureCommit(t, clone, strings.Repeat("0", 40)); err == nil {
		t.Fatal("ensureCommit found a commit nobody has")
	}
}
