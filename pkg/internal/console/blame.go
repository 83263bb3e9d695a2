package console

import (
	"context"
	"net/http"

	"github.com/matememory/matememory/pkg/internal/blame"
)

// Blamer says where each line of a file came from (blame.Service does).
type Blamer interface {
	Blame(ctx context.Context, agentID int64, name string) (blame.File, error)
}

type blameData struct {
	AgentID int64
	Name    string
	Version int64
	Lines   []blameRow
}

// blameRow is a line with its origins as the page shows them; Kept is false when no later
// change confirmed the line.
type blameRow struct {
	Number     int
	Text       string
	Introduced origin
	Confirmed  origin
	Kept       bool
}

// origin is a change with the version before it, to link the diff that made the change.
type origin struct {
	blame.Origin
	Prev int64
}

func newOrigin(o blame.Origin) origin {
	return origin{Origin: o, Prev: max(o.Version-1, 1)}
}

// blamePage shows every line of a file's current version with the change that introduced
// it and the one that last kept it: version, date, actor and the run, event and
// conversations behind a pipeline's change.
func (c *Console) blamePage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := q.r.URL.Query().Get("name")
	f, err := c.d.Blame.Blame(q.r.Context(), id, name)
	if err != nil {
		return err
	}
	d := blameData{AgentID: id, Name: f.Filename, Version: f.Version, Lines: make([]blameRow, 0, len(f.Lines))}
	for _, l := range f.Lines {
		d.Lines = append(d.Lines, blameRow{Number: l.Number, Text: l.Text, Introduced: newOrigin(l.Introduced),
			Confirmed: newOrigin(l.Confirmed), Kept: l.Confirmed.Version != l.Introduced.Version})
	}
	return c.render(q, http.StatusOK, "blame", q.lang.T("blame.title")+": "+f.Filename, "agents", d)
}
