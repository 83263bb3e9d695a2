package mcpserver

import (
	"context"
	"sync"
	"time"
)

// Hub routes workspace changes to the MCP servers bound to the changed file's agent, so they
// can notify their sessions. Its Changed method is a workspace.ChangeHook: the composition
// root passes it to the workspace service (workspace.WithChangeHook). It sees the changes
// this process makes; changes made by other processes (another API replica, the summarizer
// worker, mcp-stdio) reach a session on its next resources/list, not as a notification.
type Hub struct {
	mu      sync.Mutex
	servers map[int64]map[*Server]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{servers: map[int64]map[*Server]struct{}{}} }

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

// Remove stops telling s.
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
// are told on their own goroutines, after the change committed.
func (h *Hub) Changed(_ context.Context, agentID int64, filename string, _ int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	var targets []*Server
	for s := range h.servers[agentID] {
		targets = append(targets, s)
	}
	h.mu.Unlock()
	for _, s := range targets {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
			defer cancel()
			s.Changed(ctx, filename)
		}()
	}
}
