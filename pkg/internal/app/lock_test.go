package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/bus"
)

func TestDataDirLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "another MateMemory process") {
		t.Fatalf("second lock: got %v, want a refusal naming the other process", err)
	}
	unlock()
	unlock2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

// The embedded NATS store holds every event: its folder is its owner's only (0700), and
// so is the lock file in it.
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nats")
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	for path, want := range map[string]fs.FileMode{filepath.Dir(dir): 0o700, dir: 0o700, filepath.Join(dir, "LOCK"): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s is %v, want %v", path, got, want)
		}
	}
}
