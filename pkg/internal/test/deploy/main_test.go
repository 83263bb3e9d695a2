package deploy

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests from the deploy/ folder at the top of the tree, the files they
// validate; the tests live here because they import the service's own packages.
func TestMain(m *testing.M) {
	if err := os.Chdir("../../../../deploy"); err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
