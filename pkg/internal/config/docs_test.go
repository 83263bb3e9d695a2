package config

import (
	"os"
	"strings"
	"testing"
)

// The configuration reference must list every key with its environment name.
func TestConfigurationDocListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		row := "| `" + k + "` | `" + EnvName(k) + "` |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/configuration.md lacks a row for %s (%s)", k, EnvName(k))
		}
	}
}
