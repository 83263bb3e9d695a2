package summarizer

import (
	"os"
	"testing"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

// TestMain lets the benchmarks run the fake model in a child process (llmtest.NewExternal).
func TestMain(m *testing.M) {
	llmtest.MaybeServe(llmtest.Handlers{"echo": echoLLM})
	os.Exit(m.Run())
}
