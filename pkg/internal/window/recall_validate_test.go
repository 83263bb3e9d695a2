package window

import (
	"strings"
	"testing"
)

// Issue 19: zero is not "omitted" in the recall options, and a query the search would
// refuse is refused here, with what was wrong.
func TestRecallOptionsRefuseBadInput(t *testing.T) {
	zero, big, empty, bad := 0, 21, "", "tea \uFFFD"
	for _, c := range []struct {
		name string
		r    RecallRequest
		want string
	}{
		{"topK 0", RecallRequest{TopK: &zero}, "recall.topK"},
		{"topK 21", RecallRequest{TopK: &big}, "recall.topK"},
		{"maxTokens 0", RecallRequest{MaxTokens: &zero}, "recall.maxTokens"},
		{"query empty", RecallRequest{Query: &empty}, "query is empty"},
		{"query with a replaced lone surrogate", RecallRequest{Query: &bad}, "U+FFFD"},
	} {
		err := c.r.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %q, got %v", c.name, c.want, err)
		}
	}
	if err := (&RecallRequest{}).validate(); err != nil {
		t.Errorf("omitted options take the defaults: %v", err)
	}
}
