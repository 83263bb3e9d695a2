package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/matememory/matememory/pkg/internal/panics"
)

// Hub routes workspace changes to the MCP servers bound to the changed file's agent, so they
// can notify their sessions. Its Changed method is a workspace.ChangeHook: the composition
// root passes it to the workspace service (workspace.WithChangeHook) for this process's
// changes, and may call it for other processes' changes too (pkg/internal/app does, from the recall
// index messages); a change reported twice (same agent, file and version) is told once.
type Hub struct {
	guard   *panics.Guard
	mu      sync.Mutex
	servers map[int64]map[*Server]struct{}
	told    map[change]time.Time
	// sweepAt is the size of told past which the changes older than dedupWindow are
	// dropped from it.
	sweepAt int
}

type change struct {
	agentID  int64
	filename string
	version  int64
}

// dedupWindow is how long a change is remembered to drop its second report; minSweep the
// least size of the memory that is swept.
const (
	dedupWindow = time.Minute
	minSweep    = 1024
)

// HubOption configures a Hub.
type HubOption func(*Hub)

// HubGuard recovers, logs and counts a panic while a change is told to a server (the
// notification is then lost; the process goes on). Without it a guard logs to slog's
// default logger.
func HubGuard(g *panics.Guard) HubOption { return func(h *Hub) { h.guard = g } }

// NewHub returns an empty hub.
func NewHub(opts ...HubOption) *Hub {
	h := &Hub{servers: map[int64]map[*Server]struct{}{}, told: map[change]time.Time{}, sweepAt: minSweep}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Add makes s hear of its agent's changes.
func (h *Hub) Add(s *Server) {
	if h == nil || !s.opts.Notify {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.servers[s.agentID]
	if set == nil {
		set = map[*Server]struct{}{}
		h.servers[s.agentID] = set
	}
	set[s] = struct{}{}
}

// Remove stops telling s. Notifications already on their way still arrive: a caller that
// closes what s reads (the database) waits for them with s.Drain.
func (h *Hub) Remove(s *Server) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := h.servers[s.agentID]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.servers, s.agentID)
		}
	}
}

// notifyTimeout bounds the work one change notification does (a listing and the sends).
const notifyTimeout = 10 * time.Second

// Changed tells the agent's servers that filename changed. It does not block: the servers
// are told on their own goroutines, after the change committed. It costs a map lookup
// under the lock when no session of the agent listens (every change of every agent comes
// here: issue 32 measured 3.7 % of an extraction's CPU in it when it always remembered the
// change and swept what it remembered).
func (h *Hub) Changed(_ context.Context, agentID int64, filename string, version int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	var targets []*Server
	for s := range h.servers[agentID] {
		// A server without a session has nobody to tell (a session that opens later
		// lists the resources afresh).
		if s.hasSessions() {
			targets = append(targets, s)
		}
	}
	if len(targets) == 0 {
		h.mu.Unlock()
		return
	}
	now := time.Now()
	c := change{agentID, filename, version}
	if t, ok := h.told[c]; ok && now.Sub(t) < dedupWindow {
		h.mu.Unlock()
		return
	}
	h.told[c] = now
	if len(h.told) > h.sweepAt {
		// Amortized: the next sweep waits until the map has doubled.
		for k, t := range h.told {
			if now.Sub(t) >= dedupWindow {
				delete(h.told, k)
			}
		}
		h.sweepAt = max(minSweep, 2*len(h.told))
	}
	for _, s := range targets {
		// Counted under the lock: once Remove(s) returns, no notification to s starts that
		// s.notifying does not count.
		s.notifying.Add(1)
	}
	h.mu.Unlock()
	for _, s := range targets {
		go func() {
			defer s.notifying.Done()
			defer h.guard.Recover("mcp.hub", "agent", agentID, "file", filename)
			ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
			defer cancel()
			s.Changed(ctx, filename)
		}()
	}
}

// Drain waits for the change notifications on their way to s (Hub.Changed's goroutines).
func (s *Server) Drain() { s.notifying.Wait() }

// CloseAgent closes every MCP session of the agent's servers in this process (an erased
// agent's sessions must not go on reading its memory) and says how many it closed.
func (h *Hub) CloseAgent(agentID int64) int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	var targets []*Server
	for s := range h.servers[agentID] {
		targets = append(targets, s)
	}
	h.mu.Unlock()
	n := 0
	for _, s := range targets {
		for ss := range s.Sessions() {
			_ = ss.Close()
			n++
		}
	}
	return n
}
