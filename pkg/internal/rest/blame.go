package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// RegisterBlame adds GET …/files/{filename}/blame, a file's line-level provenance: a suffix
// of the file routes like …/history, with the same checks and errors.
func RegisterBlame(s *httpapi.Server, b *blame.Service) {
	h := blameHandlers{b: b}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/files/{filename}/blame", OperationID: "getFileBlame", Tags: []string{"Workspace"},
		Summary: "Say where every line of a file came from",
		Description: "Every line of the current version with the change that introduced it and the newest change that kept it (computed from the history as git blame does): " +
			"version, actor, action, ref and time, and for a pipeline run's change (ref is the run id) the run's kind, event id and conversation ids from the ledger. " +
			"A change of the flags alone confirms no line.",
		Metadata: map[string]any{httpapi.MetaRest: "filename", httpapi.MetaSuffix: "blame", httpapi.MetaParamDoc: filenameDoc},
		Errors:   []int{403, 404}}, h.blame)
}

type blameHandlers struct {
	b *blame.Service
}

func (h blameHandlers) blame(ctx context.Context, in *FileParams) (*httpapi.Response[api.Blame], error) {
	if err := in.ctxCheck(ctx, http.MethodGet); err != nil {
		return nil, err
	}
	f, err := h.b.Blame(ctx, in.AgentID, in.Filename)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(apiBlame(f)), nil
}

func apiBlame(f blame.File) api.Blame {
	return api.Blame{AgentID: f.AgentID, Filename: f.Filename, Version: f.Version, Count: len(f.Lines),
		Lines: each(f.Lines, func(l blame.AnnotatedLine) api.BlameLine {
			return api.BlameLine{Number: l.Number, Text: l.Text, Introduced: apiOrigin(l.Introduced), Confirmed: apiOrigin(l.Confirmed)}
		})}
}

func apiOrigin(o blame.Origin) api.LineOrigin {
	return api.LineOrigin{Version: o.Version, Actor: o.Actor, Action: o.Action, Ref: o.Ref, Time: o.Time,
		EventID: o.EventID, Conversations: o.Conversations, RunKind: o.RunKind}
}
