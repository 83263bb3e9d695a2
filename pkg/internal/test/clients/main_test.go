package clients_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests from the clients/ folder at the top of the tree, where the
// TypeScript and Python clients live; the tests live here because they start the service
// from its own packages.
func TestMain(m *testing.M) {
	if err := os.Chdir("../../../../clients"); err != nil {
		fmt.Fprintln(os.Stderr, "clients tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
