package app

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// mcpHook creates the process's MCP hub and subscribes it to the workspace's changes, so
// MCP sessions hear of files changed in this process (resources list-changed and updated
// notifications).
func (a *App) mcpHook() workspace.Option {
	a.MCPHub = mcpserver.NewHub(mcpserver.HubGuard(a.Guard))
	return workspace.WithChangeHook(a.MCPHub.Changed)
}

// mcpOptions configure the MCP HTTP handler from the configuration.
func (a *App) mcpOptions() mcpserver.HTTPOptions {
	return mcpserver.HTTPOptions{
		Hub:         a.MCPHub,
		CORSOrigins: a.Cfg.Mate.HTTP.CORSOrigins,
		KeysEnabled: len(a.Cfg.Mate.Auth.Keys) > 0,
		Log:         a.Log,
		Guard:       a.Guard,
	}
}

// subscribeMCPChanges tells the hub of changes made by other processes too: with memory
// search enabled, every writer connected to NATS (API replicas, summarizer and emergence
// workers) publishes mate.recall.index.<agentId> after each change, and an API process
// listens to those core-NATS messages (the hub drops the echo of its own changes).
func (a *App) subscribeMCPChanges() error {
	if !a.Cfg.Mate.Memory.Search.Enabled || a.NC == nil || !a.Has(TargetAPI) {
		return nil
	}
	sub, err := a.NC.Subscribe(recall.SubjectIndex+".*", func(m *nats.Msg) {
		defer a.Guard.Recover("mcp.changes", "subject", m.Subject)
		var c recall.Change
		// Conversations indexed for search are not memory files: no resource changed.
		if json.Unmarshal(m.Data, &c) != nil || c.Filename == "" || recall.IsConversation(c.Filename) ||
			m.Subject != bus.AgentSubject(recall.SubjectIndex, c.AgentID) {
			return
		}
		a.MCPHub.Changed(context.Background(), c.AgentID, c.Filename, c.Version)
	})
	if err != nil {
		return err
	}
	a.onClose(func() { _ = sub.Unsubscribe() })
	return nil
}
