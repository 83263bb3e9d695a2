package app

import (
	"github.com/matememory/matememory/pkg/mcpserver"
	"github.com/matememory/matememory/pkg/workspace"
)

// mcpHook creates the process's MCP hub and subscribes it to the workspace's changes, so
// MCP sessions hear of files changed in this process (resources list-changed and updated
// notifications).
func (a *App) mcpHook() workspace.Option {
	a.MCPHub = mcpserver.NewHub()
	return workspace.WithChangeHook(a.MCPHub.Changed)
}

// mcpOptions configure the MCP HTTP handler from the configuration.
func (a *App) mcpOptions() mcpserver.HTTPOptions {
	return mcpserver.HTTPOptions{
		Hub:         a.MCPHub,
		CORSOrigins: a.Cfg.Mate.HTTP.CORSOrigins,
		KeysEnabled: len(a.Cfg.Mate.Auth.Keys) > 0,
		Log:         a.Log,
	}
}
