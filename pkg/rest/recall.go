package rest

import (
	"net/http"

	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/tool"
)

// RegisterRecall adds memory search for the agent in the URL. The body is the
// search_workspace_memory arguments ({"query", "maxResults", "filenamePrefix", "since",
// "until"}), validated the same way as the tool and MCP.
func RegisterRecall(s *httpapi.Server, t *tool.Tools) {
	s.Handle("POST /api/v1/agents/{agentId}/memory/search", "Hybrid search (BM25 + vectors, decay, MMR) over the agent's memory files; body {query, maxResults, filenamePrefix, since, until}; each hit has file, line range, date, version and score parts", func(r *http.Request) (any, error) {
		id, err := httpapi.AgentID(r)
		if err != nil {
			return nil, err
		}
		body, err := readBody(r)
		if err != nil {
			return nil, err
		}
		if len(body) == 0 {
			return nil, httpapi.BadRequest(`a JSON body is required: {"query":"..."}`)
		}
		return t.Call(r.Context(), id, tool.SearchMemory, body)
	})
}
