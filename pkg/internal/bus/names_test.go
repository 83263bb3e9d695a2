package bus_test

import (
	"testing"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
)

// The catalogue refers to pkg/event for the names chat services need; this holds the
// subject format the two build to the same strings.
func TestNamesMatchBus(t *testing.T) {
	if event.CompletedSubject(42) != bus.AgentSubject(bus.SubjectCompleted, 42) ||
		event.SummarizeSubject(42) != bus.AgentSubject(bus.SubjectSummarize, 42) {
		t.Fatal("subject format differs")
	}
}
