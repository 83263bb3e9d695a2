package archive

import (
	"strings"
	"testing"
)

// One line held three times, deleted everywhere and written once elsewhere: that one copy
// moved, the other two left the file and are archived (a re-added copy excuses one deleted
// copy, not every copy of the same text).
func TestRemovedCountsEachCopyOfAMovedLine(t *testing.T) {
	const dog = "- walks the dog at 7"
	before := "# MEMORY\n\n## Home\n" + dog + "\n- lives in Pudong\n\n## Work\n" + dog + "\n- leads payments\n\n## Weekend\n" + dog + "\n- plays chess\n- swims\n"
	after := "# MEMORY\n\n## Home\n- lives in Pudong\n\n## Work\n- leads payments\n\n## Weekend\n- plays chess\n- swims\n\n## Habits\n" + dog + "\n"
	got := Removed(before, after, nil)
	var texts []string
	for _, e := range got {
		texts = append(texts, e.Text+" @"+e.Heading)
	}
	if n := strings.Count(strings.Join(texts, "\n"), dog); n != 2 || len(got) != 2 {
		t.Fatalf("removed %q: %d copies of the dog walk archived, want 2 (3 deleted, 1 moved)", texts, n)
	}
}
