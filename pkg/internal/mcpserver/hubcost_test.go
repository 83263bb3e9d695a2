package mcpserver

import (
	"context"
	"testing"
	"time"
)

// The hub's change fan-out costs nothing when no session of the agent listens: nothing
// remembered, no goroutine, and no allocation for an agent without a server in this process;
// once a session listens, the change is told, once (issue 32).
func TestHubChangedWithoutListenersCostsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := New(&panicky{}, 9, Options{Language: "en", Transport: Stdio, Notify: true})
	h := NewHub()
	h.Add(s)
	var v int64
	change := func(agent int64) func() {
		return func() {
			v++
			h.Changed(ctx, agent, "memory/2026-01-01.md", v)
		}
	}
	// Agent 8 has no server here (nearly every agent of an extraction): a lookup, nothing
	// allocated.
	if allocs := testing.AllocsPerRun(1000, change(8)); allocs != 0 {
		t.Errorf("%.1f allocations per change of an agent without a server, want 0", allocs)
	}
	// Agent 9 has a server without a session: the SDK's session list is looked at (its
	// copy allocates), and nothing is remembered or started.
	t.Logf("%.1f allocations per change of an agent whose server has no session", testing.AllocsPerRun(1000, change(9)))
	h.mu.Lock()
	told := len(h.told)
	h.mu.Unlock()
	if told != 0 {
		t.Errorf("the hub remembers %d changes nobody heard, want 0", told)
	}

	connectInMemory(t, ctx, s)
	h.Changed(ctx, 9, "memory/2026-01-01.md", v+1)
	h.Changed(ctx, 9, "memory/2026-01-01.md", v+1) // the same change reported twice: told once
	s.Drain()
	h.mu.Lock()
	told = len(h.told)
	h.mu.Unlock()
	if told != 1 {
		t.Errorf("with a session the hub remembers %d changes, want 1", told)
	}
}
