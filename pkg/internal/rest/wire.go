package rest

import (
	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The services' values as the wire types of pkg/api. Where a service's type has the same
// fields, a conversion says so (and stops compiling when one of the two gains a field).

func apiFile(f workspace.File) api.File {
	return api.File{AgentID: f.AgentID, Filename: f.Filename, Content: f.Content, FileSize: f.FileSize,
		Enabled: f.Enabled, SortOrder: f.SortOrder, Version: f.Version, CreateTime: f.CreateTime,
		UpdateTime: f.UpdateTime, Tokens: f.Tokens, BudgetTokens: f.BudgetTokens}
}

// each converts a slice; nil stays nil (a field without omitempty then reads null, as it
// did before the conversion).
func each[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
