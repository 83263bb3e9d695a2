package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// actorConsole marks changes made from the console in file history: the API actor (a
// person with an API key), with the key's fingerprint as the reference.
const actorConsole = "api"

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	l := c.lang(r)
	v := view{L: l, Title: l.T("signin.title"), Path: r.URL.RequestURI(), D: signinData{Next: safeNext(r.URL.Query().Get("next")), Open: !c.d.Auth.Enabled()}}
	_ = c.write(w, http.StatusOK, "signin", "layout.html", v)
}

type signinData struct {
	Next string
	Open bool
	Bad  bool
}

func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "/"
	}
	return next
}

// signin checks the key with the REST API's Authenticator and starts a session. It needs no
// CSRF token (there is no session yet) but passes the cross-origin checks like every POST.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	l := c.lang(r)
	key := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	ss := session{ID: randomID(), Issued: c.d.Now().Unix()}
	if c.d.Auth.Enabled() {
		probe, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "/", nil)
		probe.Header.Set("Authorization", "Bearer "+key)
		if _, err := c.d.Auth.Authenticate(probe); key == "" || err != nil {
			v := view{L: l, Title: l.T("signin.title"), D: signinData{Next: next, Bad: true}}
			_ = c.write(w, http.StatusUnauthorized, "signin", "layout.html", v)
			return
		}
		ss.Key = key
	}
	if err := c.ss.write(w, r, ss); err != nil {
		c.renderError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signout(q *req) error {
	c.ss.clear(q.w, q.r)
	http.Redirect(q.w, q.r, Prefix+"/signin", http.StatusSeeOther)
	return nil
}

func (c *Console) agentsPage(q *req) error {
	ctx := q.r.Context()
	list, err := c.d.Workspace.ListAgents(ctx, workspace.AgentQuery{Only: q.scope(), Limit: workspace.MaxAgentPage})
	if err != nil {
		return err
	}
	ids := make([]int64, len(list))
	for i, a := range list {
		ids[i] = a.AgentID
	}
	latest, err := c.d.Ledger.Latest(ctx, ids)
	if err != nil {
		return err
	}
	next := map[int64]*time.Time{}
	if c.d.Cron != nil && len(ids) > 0 {
		jobs, err := c.d.Cron.List(ctx, cronjob.Filter{AgentIDs: ids, TaskType: "emergence", Limit: 10 * len(ids)})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if j.Enabled && j.NextRunTime != nil && (next[j.AgentID] == nil || j.NextRunTime.Before(*next[j.AgentID])) {
				next[j.AgentID] = j.NextRunTime
			}
		}
	}
	rows := make([]agentRow, len(list))
	for i, a := range list {
		rows[i] = agentRow{AgentSummary: a, Next: next[a.AgentID]}
		if r, ok := latest[a.AgentID]; ok {
			rows[i].Last = &r
		}
	}
	return c.render(q, http.StatusOK, "agents", q.lang.T("agents.title"), "agents", rows)
}

// agentRow is one agent of the list: its files, its last run, its next consolidation.
type agentRow struct {
	workspace.AgentSummary
	Last *ledger.Run
	Next *time.Time
}

type agentData struct {
	AgentID int64
	Files   []workspace.Info
	Runs    []ledger.Run
	Next    *time.Time
	Jobs    []cronjob.Job
	// Export shows the download link.
	Export bool
	// Pending is what waits for an extraction (nil without a reader, or when it failed:
	// PendingErr says why); HasSum shows the manual summarize buttons.
	Pending    *summarizer.Pending
	PendingErr string
	HasSum     bool
}

// pending reads what of agent id waits for an extraction. A failure (NATS unavailable) is
// shown in the section rather than failing the page.
func (c *Console) pending(q *req, id int64, d *agentData) {
	if c.d.Pending == nil {
		return
	}
	p, err := c.d.Pending.Pending(q.r.Context(), id)
	if err != nil {
		d.PendingErr = err.Error()
		return
	}
	d.Pending = &p
}

func (c *Console) agentPage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	ctx := q.r.Context()
	d := agentData{AgentID: id, HasSum: c.d.Summarize != nil, Export: c.d.Export != nil}
	c.pending(q, id, &d)
	if q.r.Header.Get("HX-Request") == "true" && q.r.Header.Get("HX-Target") == "pending" {
		// The pending section refreshes itself.
		q.w.Header().Set("Vary", "HX-Request")
		return c.write(q.w, http.StatusOK, "agent", "pending", view{L: q.lang, CSRF: q.csrf, P: q.p, D: d})
	}
	if d.Files, err = c.d.Workspace.List(ctx, id, ""); err != nil {
		return err
	}
	// Injection order: the enabled files by sort order, then the others.
	enabled := make([]workspace.Info, 0, len(d.Files))
	var rest []workspace.Info
	for _, f := range d.Files {
		if f.Enabled {
			enabled = append(enabled, f)
		} else {
			rest = append(rest, f)
		}
	}
	d.Files = append(enabled, rest...)
	if d.Runs, err = c.d.Ledger.List(ctx, ledger.Filter{AgentID: id, Limit: 10}); err != nil {
		return err
	}
	if c.d.Cron != nil {
		if d.Jobs, err = c.d.Cron.List(ctx, cronjob.Filter{AgentID: id, Limit: 100}); err != nil {
			return err
		}
		for _, j := range d.Jobs {
			if j.TaskType == "emergence" && j.Enabled && j.NextRunTime != nil && (d.Next == nil || j.NextRunTime.Before(*d.Next)) {
				d.Next = j.NextRunTime
			}
		}
	}
	return c.render(q, http.StatusOK, "agent", fmt.Sprintf("%s %d", q.lang.T("agent.title"), id), "agents", d)
}

type fileData struct {
	AgentID int64
	File    workspace.File
	New     bool
}

func fileURL(agentID int64, name, page string) string {
	return fmt.Sprintf("%s/agents/%d/file%s?name=%s", Prefix, agentID, page, url.QueryEscape(name))
}

func (c *Console) filePage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := q.r.URL.Query().Get("name")
	if name == "" {
		return c.render(q, http.StatusOK, "file", q.lang.T("file.new"), "agents", fileData{AgentID: id, New: true})
	}
	f, err := c.d.Workspace.Get(q.r.Context(), id, name)
	if err != nil {
		return err
	}
	return c.render(q, http.StatusOK, "file", name, "agents", fileData{AgentID: id, File: f})
}

type conflictData struct {
	AgentID  int64
	Name     string
	Mine     string
	Theirs   workspace.File
	Expected int64
	Rows     []diffRow
	Changed  bool
}

// saveFile writes the file with compare-and-swap on the version the form was opened at;
// when someone else saved in between, it shows both versions and their diff, and keeps
// the user's text in a form that can save it over the new version.
func (c *Console) saveFile(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := strings.TrimSpace(q.r.PostFormValue("name"))
	content := strings.ReplaceAll(q.r.PostFormValue("content"), "\r\n", "\n")
	expect, err := strconv.ParseInt(q.r.PostFormValue("version"), 10, 64)
	if err != nil || expect < 0 {
		return errStatus(http.StatusBadRequest, "version must be the version the file was read at (0 to create), got %q", q.r.PostFormValue("version"))
	}
	ctx := q.r.Context()
	f, _, err := c.d.Workspace.Write(ctx, id, name, content, expect, workspace.Change{Actor: actorConsole, Ref: "console:" + q.p.KeyID})
	var conflict *workspace.ConflictError
	if errors.As(err, &conflict) {
		cur, gerr := c.d.Workspace.Get(ctx, id, name)
		if gerr != nil {
			return gerr
		}
		rows, changed := sideBySide(cur.Content, content)
		return c.render(q, http.StatusConflict, "conflict", q.lang.T("conflict.title"), "agents",
			conflictData{AgentID: id, Name: name, Mine: content, Theirs: cur, Expected: expect, Rows: rows, Changed: changed})
	}
	if err != nil {
		return err
	}
	return redirect(q, fileURL(id, name, ""), fmt.Sprintf(q.lang.T("file.saved"), f.Version))
}

func (c *Console) saveFlags(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := q.r.PostFormValue("name")
	enabled := q.r.PostFormValue("enabled") == "on"
	order, err := strconv.Atoi(strings.TrimSpace(q.r.PostFormValue("sortOrder")))
	if err != nil {
		return errStatus(http.StatusBadRequest, "sort order must be a whole number, got %q", q.r.PostFormValue("sortOrder"))
	}
	if _, err := c.d.Workspace.SetFlags(q.r.Context(), id, name, &enabled, &order, workspace.AnyVersion,
		workspace.Change{Actor: actorConsole, Ref: "console:" + q.p.KeyID}); err != nil {
		return err
	}
	return redirect(q, fmt.Sprintf("%s/agents/%d", Prefix, id), "")
}

// version is one version of a file as the history page lists it: who made it (the actor
// and reference stored with the history row of the version before it).
type version struct {
	Version            int64
	Content            string
	Action, Actor, Ref string
	At                 time.Time
	Current            bool
}

type historyData struct {
	AgentID  int64
	Name     string
	Versions []version
	A, B     int64
	Rows     []diffRow
	Changed  bool
	Current  int64
}

// versions lists every version of a file, newest first.
func (c *Console) versions(q *req, id int64, name string) (workspace.File, []version, error) {
	ctx := q.r.Context()
	cur, err := c.d.Workspace.Get(ctx, id, name)
	if err != nil {
		return cur, nil, err
	}
	hist, err := c.d.Workspace.History(ctx, id, name)
	if err != nil {
		return cur, nil, err
	}
	// History row v holds version v's content and the change that replaced it (made v+1).
	byVersion := map[int64]workspace.HistoryEntry{}
	for _, h := range hist {
		byVersion[h.Version] = h
	}
	made := func(v int64) (action, actor, ref string, at time.Time) {
		if h, ok := byVersion[v-1]; ok {
			return h.Action, h.Actor, h.Ref, h.ReplacedAt
		}
		if v == 1 {
			return "create", "", "", cur.CreateTime
		}
		return "", "", "", time.Time{}
	}
	out := []version{}
	a, ac, ref, at := made(cur.Version)
	out = append(out, version{Version: cur.Version, Content: cur.Content, Action: a, Actor: ac, Ref: ref, At: at, Current: true})
	for _, h := range hist {
		a, ac, ref, at := made(h.Version)
		out = append(out, version{Version: h.Version, Content: h.Content, Action: a, Actor: ac, Ref: ref, At: at})
	}
	return cur, out, nil
}

func (c *Console) historyPage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := q.r.URL.Query().Get("name")
	cur, vs, err := c.versions(q, id, name)
	if err != nil {
		return err
	}
	d := historyData{AgentID: id, Name: name, Versions: vs, Current: cur.Version, B: cur.Version, A: cur.Version - 1}
	if v, err := strconv.ParseInt(q.r.URL.Query().Get("a"), 10, 64); err == nil {
		d.A = v
	}
	if v, err := strconv.ParseInt(q.r.URL.Query().Get("b"), 10, 64); err == nil {
		d.B = v
	}
	// ?run=<run id>: the change that run made (the ledger's "files changed" links here).
	if run := q.r.URL.Query().Get("run"); run != "" {
		for _, v := range vs {
			if v.Ref == run {
				d.A, d.B = v.Version-1, v.Version
				if v.Version == 1 {
					d.A = 1
				}
				break
			}
		}
	}
	var left, right *version
	for i := range vs {
		if vs[i].Version == d.A {
			left = &vs[i]
		}
		if vs[i].Version == d.B {
			right = &vs[i]
		}
	}
	if left != nil && right != nil {
		d.Rows, d.Changed = sideBySide(left.Content, right.Content)
	}
	return c.render(q, http.StatusOK, "history", q.lang.T("history.title")+": "+name, "agents", d)
}

type rollbackData struct {
	AgentID int64
	Name    string
	To      int64
	Current int64
	Rows    []diffRow
	Changed bool
}

// rollbackConfirm shows what a rollback would change and asks to confirm it.
func (c *Console) rollbackConfirm(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := q.r.URL.Query().Get("name")
	to, err := strconv.ParseInt(q.r.URL.Query().Get("to"), 10, 64)
	if err != nil {
		return errStatus(http.StatusBadRequest, "to must be a version number, got %q", q.r.URL.Query().Get("to"))
	}
	cur, vs, err := c.versions(q, id, name)
	if err != nil {
		return err
	}
	d := rollbackData{AgentID: id, Name: name, To: to, Current: cur.Version}
	found := false
	for _, v := range vs {
		if v.Version == to && !v.Current {
			d.Rows, d.Changed = sideBySide(cur.Content, v.Content)
			found = true
		}
	}
	if !found {
		return errStatus(http.StatusBadRequest, "version %d is not a previous version of %s (current is %d)", to, name, cur.Version)
	}
	return c.render(q, http.StatusOK, "rollback", fmt.Sprintf(q.lang.T("rollback.title"), name, to), "agents", d)
}

func (c *Console) rollback(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	name := q.r.PostFormValue("name")
	to, err1 := strconv.ParseInt(q.r.PostFormValue("to"), 10, 64)
	expect, err2 := strconv.ParseInt(q.r.PostFormValue("version"), 10, 64)
	if err1 != nil || err2 != nil {
		return errStatus(http.StatusBadRequest, "to and version must be version numbers")
	}
	f, err := c.d.Workspace.Rollback(q.r.Context(), id, name, to, expect, workspace.Change{Actor: actorConsole, Ref: "console:" + q.p.KeyID})
	var conflict *workspace.ConflictError
	if errors.As(err, &conflict) {
		return redirect(q, fileURL(id, name, "/history"), conflict.Error())
	}
	if err != nil {
		return err
	}
	return redirect(q, fileURL(id, name, "/history"), fmt.Sprintf(q.lang.T("rollback.done"), f.Version))
}

type promptData struct {
	AgentID   int64
	Prompt    string
	Parts     []budgetPart
	Total     int
	HasWindow bool
	Form      previewForm
	Preview   *preview
	Err       string
}

// budgetPart is one segment of the token budget bar.
type budgetPart struct {
	Name    string
	Tokens  int
	Percent float64
	Offset  float64
}

// promptPage shows the workspace part of the system prompt and each file's share of its
// tokens.
func (c *Console) promptPage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	return c.promptWith(q, id, previewForm{Conversation: q.r.URL.Query().Get("conversationId"), Recall: c.d.Search != nil}, nil, "")
}

func (c *Console) promptWith(q *req, id int64, form previewForm, p *preview, msg string) error {
	ctx := q.r.Context()
	prompt, err := c.d.Workspace.SystemPrompt(ctx, id)
	if err != nil {
		return err
	}
	files, err := c.d.Workspace.List(ctx, id, "")
	if err != nil {
		return err
	}
	names := []string{}
	for _, f := range files {
		if f.Enabled {
			names = append(names, f.Filename)
		}
	}
	contents, err := c.d.Workspace.GetMany(ctx, id, names)
	if err != nil {
		return err
	}
	d := promptData{AgentID: id, Prompt: prompt, HasWindow: c.d.Window != nil, Form: form, Preview: p, Err: msg}
	for _, n := range names {
		if f, ok := contents[n]; ok && strings.TrimSpace(f.Content) != "" {
			t := tokens.Heuristic(f.Content)
			d.Parts = append(d.Parts, budgetPart{Name: n, Tokens: t})
			d.Total += t
		}
	}
	off := 0.0
	for i := range d.Parts {
		if d.Total > 0 {
			d.Parts[i].Percent = 100 * float64(d.Parts[i].Tokens) / float64(d.Total)
		}
		d.Parts[i].Offset = off
		off += d.Parts[i].Percent
	}
	status := http.StatusOK
	if msg != "" {
		status = http.StatusBadRequest
	}
	return c.render(q, status, "prompt", q.lang.T("agent.prompt"), "agents", d)
}
