package llm_test

import (
	"os"
	"testing"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

func TestMain(m *testing.M) {
	llmtest.MaybeServe(llmtest.Handlers{"bench": benchReply})
	os.Exit(m.Run())
}
