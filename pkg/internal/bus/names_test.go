package bus_test

import (
	"testing"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
)

// pkg/event restates the names chat services need without importing pkg/internal/bus (which pulls in
// nats-server); this holds the two to the same values. It lives here, not in pkg/event, so
// that pkg/event's tests do not pull the server into a chat service's module graph.
func TestNamesMatchBus(t *testing.T) {
	if event.Stream != bus.StreamEvents || event.SubjectCompleted != bus.SubjectCompleted || event.SubjectSummarize != bus.SubjectSummarize {
		t.Fatal("pkg/event and pkg/internal/bus disagree")
	}
	if event.CompletedSubject(42) != bus.AgentSubject(bus.SubjectCompleted, 42) {
		t.Fatal("subject format differs")
	}
}
