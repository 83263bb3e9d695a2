package client

import (
	"context"
	"net/http"

	"github.com/matememory/matememory/pkg/api"
)

// Blame is a file's line-level provenance: every line of its current version with the
// changes that introduced it and last kept it.
type Blame = api.Blame

// BlameLine is one line of a Blame.
type BlameLine = api.BlameLine

// LineOrigin is a change behind a line: version, actor, action, ref and time, and the
// pipeline run's event, conversations and kind when a run made it.
type LineOrigin = api.LineOrigin

// Blame answers, for every line of a file's current version, which change introduced it and
// which last kept it.
func (c *Client) Blame(ctx context.Context, agentID int64, filename string) (*Blame, error) {
	var out Blame
	if _, err := c.do(ctx, request{method: http.MethodGet, path: filesPath(agentID, filename) + "/blame"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
