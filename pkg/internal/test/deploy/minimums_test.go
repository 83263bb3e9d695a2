package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMinimumsStated: what the deploy files need of the platform is stated in the docs: the
// api's preStop sleep action needs Kubernetes 1.30, the compose file Compose v2.
func TestMinimumsStated(t *testing.T) {
	ops, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile("k8s/base/api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(api), "sleep:") && !strings.Contains(string(ops), "**Kubernetes 1.30**") {
		t.Error("k8s/base/api.yaml uses a preStop sleep action (Kubernetes 1.30), and docs/operations.md does not state that minimum")
	}
	compose, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(compose), "service_completed_successfully") && !strings.Contains(string(ops), "**Docker Compose v2**") {
		t.Error("the compose file needs Compose v2 (service_completed_successfully), and docs/operations.md does not state that minimum")
	}
	for _, line := range strings.Split(string(compose), "\n") {
		if strings.HasPrefix(line, "version:") {
			t.Errorf("the compose file has a top-level %q (Compose v1); the Compose Specification has none", line)
		}
	}
}
