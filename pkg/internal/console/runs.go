package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/ledger"
)

type runsData struct {
	// AgentID is the agent of a per-agent page; 0 on the page of every agent in scope,
	// where Agent is the agent filter as typed.
	AgentID int64
	Agent   string
	Runs    []ledger.Run
	Kind    string
	Status  string
	Since   string
	HasSum  bool
	HasEmg  bool
	// Before is the page's cursor (a run id: runs older than it); Older the next page's.
	Before string
	Older  string
}

// runsPage is how many runs a ledger page lists.
const runsPage = 100

var runStatuses = []string{"completed", "skipped", "deferred", "failed", "refused"}

func (c *Console) runsPage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	return c.runs(q, id, ledger.Filter{AgentID: id})
}

// allRunsPage is the ledger of every agent the key may act for, with an agent filter.
func (c *Console) allRunsPage(q *req) error {
	f := ledger.Filter{AgentIDs: q.scope()}
	if a := strings.TrimSpace(q.r.URL.Query().Get("agent")); a != "" {
		id, err := parseID(a)
		if err != nil {
			return err
		}
		if !q.p.MayAct(id) {
			return errStatus(http.StatusForbidden, q.lang.T("err.agentscope"), id)
		}
		f = ledger.Filter{AgentID: id}
	}
	return c.runs(q, 0, f)
}

func (c *Console) runs(q *req, id int64, f ledger.Filter) error {
	var err error
	v := q.r.URL.Query()
	d := runsData{AgentID: id, Agent: v.Get("agent"), Kind: v.Get("kind"), Status: v.Get("status"), Since: v.Get("since"),
		HasSum: c.d.Summarize != nil && id > 0, HasEmg: c.d.Emergence != nil && id > 0}
	d.Before = v.Get("before")
	f.Kind, f.Status, f.Limit, f.BeforeRun = d.Kind, d.Status, runsPage, d.Before
	if d.Kind != "" && d.Kind != ledger.KindSummarize && d.Kind != ledger.KindEmergence {
		return errStatus(http.StatusBadRequest, "kind must be summarize or emergence, got %q", d.Kind)
	}
	if d.Status != "" && !slices.Contains(runStatuses, d.Status) {
		return errStatus(http.StatusBadRequest, "status must be one of %s, got %q", strings.Join(runStatuses, ", "), d.Status)
	}
	if d.Since != "" {
		t, err := parseSince(d.Since, c.d.Now())
		if err != nil {
			return errStatus(http.StatusBadRequest, "since: %v", err)
		}
		f.Since = t
	}
	if d.Runs, err = c.d.Ledger.List(q.r.Context(), f); err != nil {
		return err
	}
	if len(d.Runs) == runsPage {
		u := q.r.URL.Query()
		u.Set("before", d.Runs[len(d.Runs)-1].RunID)
		d.Older = q.r.URL.Path + "?" + u.Encode()
	}
	if q.r.Header.Get("HX-Request") == "true" && q.r.Header.Get("HX-Target") == "runs-table" {
		q.w.Header().Set("Vary", "HX-Request")
		return c.write(q.w, http.StatusOK, "runs", "table", view{L: q.lang, CSRF: q.csrf, P: q.p, D: d})
	}
	nav := "agents"
	if id == 0 {
		nav = "runs"
	}
	return c.render(q, http.StatusOK, "runs", q.lang.T("runs.title"), nav, d)
}

// parseSince reads a date-time input ("2006-01-02T15:04", UTC), RFC 3339, or a duration ago
// ("24h").
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2006-01-02T15:04, RFC 3339, or a duration such as 24h)", s)
}

// outcome is what a manual button shows when its answer arrives.
type outcome struct {
	OK      bool
	Pending bool
	Status  string
	Reason  string
	RunID   string
	Request string
}

func (c *Console) manualSummarize(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	if c.d.Summarize == nil {
		return errStatus(http.StatusNotFound, "manual summarize is not available in this process")
	}
	conv := strings.TrimSpace(q.r.PostFormValue("conversationId"))
	force := q.r.PostFormValue("force") == "on"
	out, err := c.d.Summarize.Summarize(q.r.Context(), id, conv, force, c.d.ManualWait)
	var inv *event.InvalidError
	if errors.As(err, &inv) {
		return c.showOutcome(q, id, outcome{Status: "invalid", Reason: inv.Msg})
	}
	if err != nil {
		return c.showOutcome(q, id, outcome{Status: "error", Reason: err.Error()})
	}
	o := outcome{Status: out.Status, Reason: out.Reason, RunID: out.RunID, Request: out.RequestID, OK: out.Status == "completed"}
	if out.Pending {
		o.Pending, o.Status = true, "pending"
		o.Reason = q.lang.T("runs.pending")
		if out.NoWorker {
			o.Reason = q.lang.T("runs.noworker")
		}
	}
	return c.showOutcome(q, id, o)
}

func (c *Console) manualEmergence(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	if c.d.Emergence == nil {
		return errStatus(http.StatusNotFound, "manual emergence is not available in this process")
	}
	res, err := c.d.Emergence.Run(q.r.Context(), id, c.d.ManualWait)
	if err != nil {
		status := "failed"
		if !errors.Is(err, emergence.ErrFailed) {
			status = "error"
		}
		return c.showOutcome(q, id, outcome{Status: status, Reason: err.Error(), Request: res.RequestID})
	}
	o := outcome{Status: res.Status, Reason: res.Reason, RunID: res.RunID, Request: res.RequestID, OK: res.Status == "completed"}
	if res.Status == "pending" {
		o.Pending = true
	}
	return c.showOutcome(q, id, o)
}

func parseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, errStatus(http.StatusBadRequest, "id must be a positive number, got %q", s)
	}
	return n, nil
}

// showOutcome answers a manual button: in place for htmx, else back on the runs page with
// the outcome as its message (the page works without JavaScript).
func (c *Console) showOutcome(q *req, agentID int64, o outcome) error {
	if q.r.Header.Get("HX-Request") == "true" {
		return c.fragment(q, "outcome", o)
	}
	msg := o.Status
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	return redirect(q, fmt.Sprintf("%s/agents/%d/runs", Prefix, agentID), msg)
}
