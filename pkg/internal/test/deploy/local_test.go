package deploy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// parseEnvFile reads KEY=VALUE lines (comments and blank lines skipped, one level of single
// quotes removed, as the shell's `.` does for these values).
func parseEnvFile(raw []byte) (map[string]string, error) {
	env := map[string]string{}
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", i+1, line)
		}
		if strings.ContainsAny(v, "();&|<>*") && !(strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'")) {
			return nil, fmt.Errorf("line %d: %s's value needs single quotes for the shell", i+1, k)
		}
		env[k] = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
	}
	return env, nil
}

// TestLocalRun checks the files docs/operations.md runs the processes by hand with.
func TestLocalRun(t *testing.T) {
	raw, err := os.ReadFile("local/matememory.env")
	if err != nil {
		t.Fatal(err)
	}
	env, err := parseEnvFile(raw)
	if err != nil {
		t.Fatalf("local/matememory.env: %v", err)
	}
	noErrs(t, checkEnvNames("local/matememory.env", env, settingEnv(t)))
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"} {
		env["MATE_HTTP_ADDR"] = addr
		cfg, err := loadSettings("local/matememory.env", "", env)
		if err != nil {
			t.Fatal(err)
		}
		noErrs(t, checkDeployedSettings("local/matememory.env", cfg, false))
		if cfg.Mate.NATS.Replicas != 3 {
			t.Errorf("local/matememory.env: MATE_NATS_REPLICAS %d; the hand-run cluster has three nodes", cfg.Mate.NATS.Replicas)
		}
		if strings.Contains(cfg.Mate.NATS.URL, ":4222") {
			t.Errorf("local/matememory.env: %s uses port 4222, which a system nats-server often holds", cfg.Mate.NATS.URL)
		}
	}

	opts, err := server.ProcessConfigFile("local/sync-always.conf")
	if err != nil {
		t.Fatalf("local/sync-always.conf: %v", err)
	}
	if !opts.JetStream || !opts.SyncAlways {
		t.Errorf("local/sync-always.conf: jetstream=%v sync_always=%v; both must be on", opts.JetStream, opts.SyncAlways)
	}

	if _, err := parseEnvFile([]byte("MATE_DATABASE_DSN=u:p@tcp(h:3306)/db\n")); err == nil {
		t.Error("an unquoted value with shell metacharacters parsed")
	}
}
