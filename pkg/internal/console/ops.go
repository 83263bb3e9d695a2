package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/scheduler"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

type streamRow struct {
	Name      string
	Msgs      uint64
	Bytes     uint64
	Consumers []consumerRow
}

type consumerRow struct {
	Name       string
	Pending    uint64
	AckPending int
	Redeliv    int
	Waiting    int
}

// dlqPage is how many dead letters the operations page shows at once.
const dlqPage = 100

// clip shortens s to at most n bytes on a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

type dlqRow struct {
	bus.DeadLetterEntry
	Payload string
}

type opsData struct {
	Streams   []streamRow
	StreamErr string
	Leader    *lease.Holder
	DLQ       []dlqRow
	DLQErr    string
	// DLQAfter is the sequence the shown page starts after; DLQNext the one the next page
	// starts after (0: this is the last page).
	DLQAfter, DLQNext uint64
	RunsChart         template.HTML
	LatChart          template.HTML
	LagChart          template.HTML
	// OverBudget are the core files over their budgets (issue 22), OverErr why they are not.
	OverBudget []workspace.OverBudget
	OverErr    string
}

// opsPage is the operator's view: streams and consumer lag, the scheduler leader, dead
// letters, and charts of the runs. Admin scope only.
func (c *Console) opsPage(q *req) error {
	if err := q.requireAdmin(); err != nil {
		return err
	}
	ctx := q.r.Context()
	d := opsData{}
	if c.d.JS != nil {
		var err error
		if d.Streams, err = c.streams(ctx); err != nil {
			d.StreamErr = err.Error()
		}
		d.Leader = c.leader(ctx)
		if v := q.r.URL.Query().Get("dlqAfter"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return errStatus(http.StatusBadRequest, "dlqAfter must be a dead letter's sequence number, got %q", v)
			}
			d.DLQAfter = n
		}
		list, err := bus.ListDeadLetters(ctx, c.d.JS, d.DLQAfter, "", dlqPage)
		if err != nil {
			d.DLQErr = err.Error()
		}
		for _, e := range list {
			d.DLQ = append(d.DLQ, dlqRow{DeadLetterEntry: e, Payload: clip(string(e.Data), 300)})
		}
		if len(list) == dlqPage {
			d.DLQNext = list[len(list)-1].Seq
		}
	}
	now := c.d.Now().UTC()
	runs, err := c.d.Ledger.Points(ctx, now.Add(-24*time.Hour), 5000)
	if err != nil {
		return err
	}
	d.RunsChart = runsPerHour(runs, now, q.lang.T("ops.chart"))
	d.LatChart = latencyChart(runs, q.lang.T("ops.latency"))
	d.LagChart = lagChart(d.Streams, q.lang.T("ops.pending"))
	if d.OverBudget, err = c.d.Workspace.ListOverBudget(ctx, 100); err != nil {
		d.OverErr = err.Error()
	}
	return c.render(q, http.StatusOK, "ops", q.lang.T("ops.title"), "ops", d)
}

func (c *Console) streams(ctx context.Context) ([]streamRow, error) {
	var out []streamRow
	names := c.d.JS.StreamNames(ctx)
	var all []string
	for n := range names.Name() {
		all = append(all, n)
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	sort.Strings(all)
	for _, n := range all {
		if strings.HasPrefix(n, "KV_") {
			continue // KV buckets (leases, caches) are not queues
		}
		s, err := c.d.JS.Stream(ctx, n)
		if err != nil {
			return out, fmt.Errorf("stream %s: %w", n, err)
		}
		info := s.CachedInfo()
		row := streamRow{Name: n, Msgs: info.State.Msgs, Bytes: info.State.Bytes}
		cl := s.ListConsumers(ctx)
		for ci := range cl.Info() {
			row.Consumers = append(row.Consumers, consumerRow{Name: ci.Name, Pending: ci.NumPending,
				AckPending: ci.NumAckPending, Redeliv: ci.NumRedelivered, Waiting: ci.NumWaiting})
		}
		if err := cl.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			return out, fmt.Errorf("consumers of %s: %w", n, err)
		}
		out = append(out, row)
	}
	return out, nil
}

// leader reads the scheduler's leader lease (nil when no scheduler holds it).
func (c *Console) leader(ctx context.Context) *lease.Holder {
	kv, err := c.d.JS.KeyValue(ctx, scheduler.LeaderBucket)
	if err != nil {
		return nil
	}
	e, err := kv.Get(ctx, "0")
	if err != nil {
		return nil
	}
	var h lease.Holder
	if json.Unmarshal(e.Value(), &h) != nil || h.Owner == "" {
		return nil
	}
	return &h
}

func (c *Console) dlqRetry(q *req) error {
	if err := q.requireAdmin(); err != nil {
		return err
	}
	seq, err := parseID(q.r.PathValue("seq"))
	if err != nil {
		return err
	}
	res, err := bus.RetryDeadLetter(q.r.Context(), c.d.JS, uint64(seq))
	if errors.Is(err, bus.ErrDeadLetterNotFound) {
		return redirect(q, Prefix+"/ops", fmt.Sprintf("no dead letter with seq %d (already retried?)", seq))
	}
	if err != nil {
		return err
	}
	return redirect(q, Prefix+"/ops", fmt.Sprintf(q.lang.T("ops.retried"), seq, res.Subject))
}

func (c *Console) dlqDiscard(q *req) error {
	if err := q.requireAdmin(); err != nil {
		return err
	}
	seq, err := parseID(q.r.PathValue("seq"))
	if err != nil {
		return err
	}
	err = bus.DiscardDeadLetter(q.r.Context(), c.d.JS, uint64(seq))
	if errors.Is(err, bus.ErrDeadLetterNotFound) {
		return redirect(q, Prefix+"/ops", fmt.Sprintf("no dead letter with seq %d (already retried?)", seq))
	}
	if err != nil {
		return err
	}
	return redirect(q, Prefix+"/ops", fmt.Sprintf(q.lang.T("ops.discarded"), seq))
}

// --- charts: small SVGs drawn on the server (no script, readable with a screen reader
// through their title and the table next to them).

var statusColor = map[string]string{"completed": "#2f7d32", "skipped": "#7a7a7a", "deferred": "#b8860b",
	"failed": "#c62828", "refused": "#6a1b9a"}

func runsPerHour(runs []ledger.Point, now time.Time, title string) template.HTML {
	const hours, w, h, pad = 24, 480, 140, 20
	type bucket map[string]int
	b := make([]bucket, hours)
	for i := range b {
		b[i] = bucket{}
	}
	start := now.Truncate(time.Hour).Add(-(hours - 1) * time.Hour)
	peak := 1
	for _, r := range runs {
		i := int(r.CreateTime.Sub(start) / time.Hour)
		if i < 0 || i >= hours {
			continue
		}
		b[i][r.Status]++
		n := 0
		for _, v := range b[i] {
			n += v
		}
		peak = max(peak, n)
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`, w, h, template.HTMLEscapeString(title), template.HTMLEscapeString(title))
	bw := float64(w-2*pad) / hours
	for i, bk := range b {
		y := float64(h - pad)
		for _, st := range runStatuses {
			n := bk[st]
			if n == 0 {
				continue
			}
			bh := float64(n) / float64(peak) * float64(h-2*pad)
			y -= bh
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d</title></rect>`,
				float64(pad)+float64(i)*bw+1, y, bw-2, bh, statusColor[st], start.Add(time.Duration(i)*time.Hour).Format("15:04"), st, n)
		}
	}
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>`, pad, h-pad, w-pad, h-pad)
	fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="10">%s</text><text x="%d" y="%d" font-size="10" text-anchor="end">%s</text>`,
		pad, h-4, start.Format("15:04"), w-pad, h-4, now.Format("15:04"))
	fmt.Fprintf(&s, `<text x="2" y="%d" font-size="10">%d</text>`, pad, peak)
	x := pad
	for _, st := range runStatuses {
		fmt.Fprintf(&s, `<rect x="%d" y="2" width="8" height="8" fill="%s"/><text x="%d" y="10" font-size="10">%s</text>`, x+40, statusColor[st], x+52, st)
		x += 80
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

func latencyChart(runs []ledger.Point, title string) template.HTML {
	const w, h, pad = 480, 120, 20
	var lat []int64
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		if runs[i].Kind == ledger.KindSummarize && runs[i].LatencyMs > 0 {
			lat = append(lat, runs[i].LatencyMs)
		}
	}
	if len(lat) > 100 {
		lat = lat[len(lat)-100:]
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`, w, h, template.HTMLEscapeString(title), template.HTMLEscapeString(title))
	peak := int64(1)
	for _, v := range lat {
		peak = max(peak, v)
	}
	if len(lat) > 0 {
		var pts []string
		step := float64(w-2*pad) / float64(max(len(lat)-1, 1))
		for i, v := range lat {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", float64(pad)+float64(i)*step, float64(h-pad)-float64(v)/float64(peak)*float64(h-2*pad)))
		}
		fmt.Fprintf(&s, `<polyline fill="none" stroke="#1565c0" stroke-width="2" points="%s"/>`, strings.Join(pts, " "))
		for i, p := range pts {
			x, y, _ := strings.Cut(p, ",")
			fmt.Fprintf(&s, `<circle cx="%s" cy="%s" r="3" fill="#1565c0"><title>%d ms</title></circle>`, x, y, lat[i])
		}
	}
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/><text x="2" y="%d" font-size="10">%d ms</text></svg>`, pad, h-pad, w-pad, h-pad, pad, peak)
	return template.HTML(s.String())
}

func lagChart(streams []streamRow, title string) template.HTML {
	type bar struct {
		name string
		n    uint64
	}
	var bars []bar
	peak := uint64(1)
	for _, s := range streams {
		for _, c := range s.Consumers {
			bars = append(bars, bar{s.Name + "/" + c.Name, c.Pending})
			peak = max(peak, c.Pending)
		}
	}
	const w, row = 480, 18
	h := row*len(bars) + 4
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`, w, max(h, 20), template.HTMLEscapeString(title), template.HTMLEscapeString(title))
	for i, b := range bars {
		bw := float64(b.n) / float64(peak) * 200
		fmt.Fprintf(&s, `<text x="0" y="%d" font-size="11">%s</text><rect x="240" y="%d" width="%.1f" height="12" fill="#ef6c00"/><text x="%.1f" y="%d" font-size="11">%d</text>`,
			i*row+13, template.HTMLEscapeString(b.name), i*row+3, bw, 244+bw, i*row+13, b.n)
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// --- cron jobs

type cronData struct {
	Jobs   []cronjob.Job
	Form   cronForm
	Err    string
	Agents []int64
}

// cronForm is the job form's values as typed (so an invalid one is shown again).
type cronForm struct {
	ID       int64
	AgentID  string
	Name     string
	Expr     string
	TZ       string
	TaskType string
	Message  string
	Enabled  bool
	Next     []time.Time
	Version  time.Time
}

func (q *req) mayManageJob(agentID int64) bool { return q.p.Open || q.p.Admin || q.p.MayAct(agentID) }

// cronScope is the agents whose jobs the caller sees (nil: every agent), as the REST API.
func (q *req) cronScope() []int64 {
	if q.p.Admin {
		return nil
	}
	ids := q.scope()
	if ids == nil {
		return nil
	}
	return ids
}

func (c *Console) cronPage(q *req) error {
	if c.d.Cron == nil {
		return errStatus(http.StatusNotFound, "cron jobs are not available in this process")
	}
	return c.cronList(q, http.StatusOK, cronForm{TaskType: "text", Enabled: true}, "")
}

func (c *Console) cronList(q *req, status int, form cronForm, msg string) error {
	jobs, err := c.d.Cron.List(q.r.Context(), cronjob.Filter{AgentIDs: q.cronScope(), Limit: 500})
	if err != nil {
		return err
	}
	return c.render(q, status, "cron", q.lang.T("cron.title"), "cron", cronData{Jobs: jobs, Form: form, Err: msg})
}

func formInput(q *req) (cronForm, cronjob.Input, error) {
	f := cronForm{AgentID: strings.TrimSpace(q.r.PostFormValue("agentId")), Name: q.r.PostFormValue("name"),
		Expr: strings.TrimSpace(q.r.PostFormValue("cronExpression")), TZ: strings.TrimSpace(q.r.PostFormValue("timezone")),
		TaskType: q.r.PostFormValue("taskType"), Message: q.r.PostFormValue("triggerMessage"),
		Enabled: q.r.PostFormValue("enabled") == "on"}
	in := cronjob.Input{Name: &f.Name, CronExpression: &f.Expr, TaskType: &f.TaskType, Enabled: &f.Enabled}
	if f.TZ != "" {
		in.Timezone = &f.TZ
	}
	if f.Message != "" || f.TaskType == "text" {
		in.TriggerMessage = &f.Message
	}
	var id int64
	if _, err := fmt.Sscan(f.AgentID, &id); err != nil || id <= 0 {
		return f, in, &formError{fmt.Sprintf("agent id must be a positive number, got %q", f.AgentID)}
	}
	in.AgentID = &id
	if !q.mayManageJob(id) {
		return f, in, &formError{fmt.Sprintf(q.lang.T("err.agentscope"), id)}
	}
	return f, in, nil
}

func (c *Console) cronCreate(q *req) error {
	if c.d.Cron == nil {
		return errStatus(http.StatusNotFound, "cron jobs are not available in this process")
	}
	f, in, err := formInput(q)
	if err == nil {
		var j cronjob.Job
		if j, err = c.d.Cron.Create(q.r.Context(), in); err == nil {
			return redirect(q, fmt.Sprintf("%s/cron/%d", Prefix, j.ID), "")
		}
	}
	if callerError(err) {
		return c.cronList(q, http.StatusBadRequest, f, err.Error())
	}
	return err
}

// formError is a form value the console itself refused (an agent id, the key's scope).
type formError struct{ msg string }

func (e *formError) Error() string { return e.msg }

// callerError reports whether err is the caller's to fix (shown on the form again) rather
// than the server's.
func callerError(err error) bool {
	var fe *formError
	return errors.As(err, &fe) || errors.Is(err, cronjob.ErrInvalid) || errors.Is(err, cronjob.ErrConflict)
}

type cronEditData struct {
	Form cronForm
	Err  string
}

func (c *Console) loadJob(q *req) (cronjob.Job, error) {
	if c.d.Cron == nil {
		return cronjob.Job{}, errStatus(http.StatusNotFound, "cron jobs are not available in this process")
	}
	id, err := parseID(q.r.PathValue("id"))
	if err != nil {
		return cronjob.Job{}, err
	}
	j, err := c.d.Cron.Get(q.r.Context(), id)
	if err != nil {
		return j, err
	}
	if !q.mayManageJob(j.AgentID) {
		// As the REST API: a job of another agent is not found, not forbidden.
		return j, errStatus(http.StatusNotFound, "cron job %d not found", id)
	}
	return j, nil
}

func jobForm(j cronjob.Job, now time.Time) cronForm {
	f := cronForm{ID: j.ID, AgentID: fmt.Sprint(j.AgentID), Name: j.Name, Expr: j.CronExpression, TZ: j.Timezone,
		TaskType: j.TaskType, Message: j.TriggerMessage, Enabled: j.Enabled}
	f.Next = nextFires(j.CronExpression, j.Timezone, now, 5)
	return f
}

// nextFires lists the next n fire times of expr in tz (none when it does not parse).
func nextFires(expr, tz string, now time.Time, n int) []time.Time {
	s, err := cronjob.Parse(expr, tz)
	if err != nil {
		return nil
	}
	var out []time.Time
	t := now
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.In(s.Location()))
	}
	return out
}

func (c *Console) cronEditPage(q *req) error {
	j, err := c.loadJob(q)
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "cronedit", j.Name, "cron", cronEditData{Form: jobForm(j, c.d.Now())})
}

func (c *Console) cronUpdate(q *req) error {
	j, err := c.loadJob(q)
	if err != nil {
		return err
	}
	f, in, err := formInput(q)
	f.ID = j.ID
	if err == nil {
		if _, err = c.d.Cron.Replace(q.r.Context(), j.ID, in); err == nil {
			return redirect(q, fmt.Sprintf("%s/cron/%d", Prefix, j.ID), "✓")
		}
	}
	if callerError(err) {
		f.Next = nextFires(f.Expr, f.TZ, c.d.Now(), 5)
		return c.render(q, http.StatusBadRequest, "cronedit", j.Name, "cron", cronEditData{Form: f, Err: err.Error()})
	}
	return err
}

func (c *Console) cronDelete(q *req) error {
	j, err := c.loadJob(q)
	if err != nil {
		return err
	}
	if err := c.d.Cron.Delete(q.r.Context(), j.ID); err != nil {
		return err
	}
	return redirect(q, Prefix+"/cron", "")
}

type firesData struct {
	Next []time.Time
	Err  string
}

// cronPreview answers the job form's live preview (htmx): the next fire times of the
// expression being typed, or why it does not parse.
func (c *Console) cronPreview(q *req) error {
	v := q.r.URL.Query()
	expr, tz := strings.TrimSpace(v.Get("cronExpression")), strings.TrimSpace(v.Get("timezone"))
	d := firesData{}
	if expr != "" {
		if tz == "" {
			tz = "UTC"
		}
		if _, err := cronjob.Parse(expr, tz); err != nil {
			d.Err = err.Error()
		} else {
			d.Next = nextFires(expr, tz, c.d.Now(), 5)
		}
	}
	return c.fragment(q, "fires", d)
}

func (c *Console) cronDeleteConfirm(q *req) error {
	j, err := c.loadJob(q)
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "confirm", j.Name, "cron", confirmData{
		Title: fmt.Sprintf(q.lang.T("confirm.cron"), j.Name, j.AgentID), Text: j.CronExpression + " (" + j.Timezone + ")",
		Action: fmt.Sprintf("%s/cron/%d/delete", Prefix, j.ID), Confirm: q.lang.T("cron.delete"), Cancel: fmt.Sprintf("%s/cron/%d", Prefix, j.ID)})
}

func (c *Console) dlqDiscardConfirm(q *req) error {
	if err := q.requireAdmin(); err != nil {
		return err
	}
	seq, err := parseID(q.r.PathValue("seq"))
	if err != nil {
		return err
	}
	e, err := bus.GetDeadLetter(q.r.Context(), c.d.JS, uint64(seq))
	if errors.Is(err, bus.ErrDeadLetterNotFound) {
		return errStatus(http.StatusNotFound, "no dead letter with seq %d (already retried?)", seq)
	}
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "confirm", q.lang.T("ops.discard"), "ops", confirmData{
		Title: fmt.Sprintf(q.lang.T("confirm.dlq"), seq), Text: e.Subject + ": " + e.Reason,
		Action: fmt.Sprintf("%s/ops/dlq/%d/discard", Prefix, seq), Confirm: q.lang.T("ops.discard"), Cancel: Prefix + "/ops"})
}
