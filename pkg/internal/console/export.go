package console

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/matememory/matememory/pkg/internal/bundle"
)

// Exporter writes an agent's bundle (bundle.Service does).
type Exporter interface {
	Export(ctx context.Context, w io.Writer, agentID int64, inc bundle.Includes) (bundle.ExportSummary, error)
}

// export downloads the agent's whole bundle (history, messages and ledger included: what
// a person asking for their data is owed), as GET /api/v1/agents/{agentId}/export does.
func (c *Console) export(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	if c.d.Export == nil {
		return errStatus(http.StatusNotFound, "%s", q.lang.T("err.notfound"))
	}
	w := &downloadWriter{w: q.w, name: fmt.Sprintf("agent-%d-%s.ndjson", id, c.d.Now().UTC().Format("20060102T150405Z"))}
	sum, err := c.d.Export.Export(q.r.Context(), w, id, bundle.Includes{History: true, Messages: true, Ledger: true})
	switch {
	case err != nil && !w.started:
		return err
	case err != nil:
		// Sent in part: the bundle lacks its checksums line, which an import refuses.
		c.d.Log.Warn("console export cut short", "agent", id, "bytes", sum.Bytes, "err", err)
	default:
		c.d.Log.Info("agent exported from the console", "agent", id, "bytes", sum.Bytes)
	}
	return nil
}

// downloadWriter sends the download's headers with its first byte, so an error before it is
// still shown as a page.
type downloadWriter struct {
	w       http.ResponseWriter
	name    string
	started bool
}

func (d *downloadWriter) Write(b []byte) (int, error) {
	if !d.started {
		d.started = true
		h := d.w.Header()
		h.Set("Content-Type", bundle.ContentType)
		h.Set("Content-Disposition", `attachment; filename="`+d.name+`"`)
		h.Set("Cache-Control", "no-store")
		d.w.WriteHeader(http.StatusOK)
	}
	return d.w.Write(b)
}
