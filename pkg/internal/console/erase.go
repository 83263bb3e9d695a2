package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/matememory/matememory/pkg/internal/erasure"
)

// Eraser erases agents (erasure.Service).
type Eraser interface {
	EraseAgent(ctx context.Context, agentID int64, actor string) (erasure.Receipt, error)
}

type eraseData struct {
	AgentID int64
	Err     string
	Receipt *erasure.Receipt
	Lines   []receiptLine
}

type receiptLine struct {
	Store string
	Count int64
}

// erasePage asks for the agent id to be typed before the erasure.
func (c *Console) erasePage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "erase", fmt.Sprintf(q.lang.T("erase.title"), id), "agents", eraseData{AgentID: id})
}

// erase erases the agent when the typed id matches, and shows the receipt.
func (c *Console) erase(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	if c.d.Erase == nil {
		return errStatus(http.StatusServiceUnavailable, "%s", q.lang.T("erase.unavailable"))
	}
	if strings.TrimSpace(q.r.PostFormValue("confirm")) != strconv.FormatInt(id, 10) {
		return c.render(q, http.StatusBadRequest, "erase", fmt.Sprintf(q.lang.T("erase.title"), id), "agents",
			eraseData{AgentID: id, Err: fmt.Sprintf(q.lang.T("erase.mismatch"), id)})
	}
	actor := "console"
	if q.p.KeyID != "" {
		actor = "console:" + q.p.KeyID
	}
	r, err := c.d.Erase.EraseAgent(q.r.Context(), id, actor)
	if err != nil {
		return c.render(q, http.StatusConflict, "erase", fmt.Sprintf(q.lang.T("erase.title"), id), "agents", eraseData{AgentID: id, Err: err.Error()})
	}
	d := eraseData{AgentID: id, Receipt: &r}
	for k, n := range r.Rows {
		d.Lines = append(d.Lines, receiptLine{k, n})
	}
	for k, n := range r.Messages {
		d.Lines = append(d.Lines, receiptLine{k, n})
	}
	sort.Slice(d.Lines, func(i, j int) bool { return d.Lines[i].Store < d.Lines[j].Store })
	return c.render(q, http.StatusOK, "erase", fmt.Sprintf(q.lang.T("erase.done"), id), "agents", d)
}
