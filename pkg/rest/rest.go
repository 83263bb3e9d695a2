// Package rest holds MateMemory's HTTP handlers: thin ports that decode a request, call the
// application services and return data for the envelope.
package rest

import (
	"github.com/matememory/matememory/pkg/conversation"
	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/tool"
	"github.com/matememory/matememory/pkg/workspace"
)

// RegisterWorkspace adds the workspace file routes.
func RegisterWorkspace(s *httpapi.Server, ws *workspace.Service) {}

// RegisterMessages adds the conversation message routes.
func RegisterMessages(s *httpapi.Server, msgs *conversation.Store, ws *workspace.Service) {}

// RegisterTools adds the tool routes.
func RegisterTools(s *httpapi.Server, t *tool.Tools) {}
