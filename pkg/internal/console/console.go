// Package console is MateMemory's web console under /console: server-rendered pages (Go
// html/template, a vendored htmx for small in-place updates, SVG charts drawn on the
// server) over the same domain services and scopes as the REST API. It never calls the REST
// API over HTTP. See docs/console.md.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"github.com/matememory/matememory/pkg/internal/window"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Prefix is where the console is mounted.
const Prefix = "/console"

//go:embed static
var staticFS embed.FS

// Summarizer runs a manual summarize request (summarizer.API does).
type Summarizer interface {
	Summarize(ctx context.Context, agentID int64, conversationID string, force bool, wait time.Duration) (summarizer.ManualOutcome, error)
}

// Emergence runs a manual emergence request (emergence.Trigger does).
type Emergence interface {
	Run(ctx context.Context, agentID int64, wait time.Duration) (emergence.Result, error)
}

// Window assembles a context window (window.Service does).
type Window interface {
	Assemble(ctx context.Context, req window.Request) (*window.Result, error)
}

// Searcher searches an agent's memory (recall.Searcher does).
type Searcher interface {
	Search(ctx context.Context, agentID int64, q recall.Query) (recall.Result, error)
}

// Pending reads what of an agent waits for an extraction (summarizer.PendingReader does).
type Pending interface {
	Pending(ctx context.Context, agentID int64) (summarizer.Pending, error)
}

// Deps are the services the console shows. Nil ones hide their pages' parts.
type Deps struct {
	Auth *httpapi.Authenticator
	// Keys are the configured API keys' secrets: the session cookie keys derive from them
	// (the same on every replica).
	Keys      []string
	Workspace *workspace.Service
	Ledger    *ledger.Ledger
	Cron      *cronjob.Service
	JS        jetstream.JetStream
	Summarize Summarizer
	Emergence Emergence
	Window    Window
	Search    Searcher
	Pending   Pending
	// Blame says where each line of a file came from (nil: blamed from Workspace and Ledger).
	Blame Blamer
	// Export downloads an agent's bundle (nil hides the link).
	Export Exporter
	// Erase erases agents (nil: the erase page says it is not available).
	Erase Eraser
	// Language is mate.language: the console's default language.
	Language string
	// ManualWait bounds how long a manual button waits for its outcome (default 20 s).
	ManualWait time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// Console serves /console.
type Console struct {
	d     Deps
	mux   *http.ServeMux
	ss    *sessions
	pages *pages
	cop   *http.CrossOriginProtection
}

// New builds the console.
func New(d Deps) (*Console, error) {
	if d.Auth == nil || d.Workspace == nil {
		return nil, errors.New("console: Auth and Workspace are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.ManualWait <= 0 {
		d.ManualWait = 20 * time.Second
	}
	if d.Ledger == nil {
		return nil, errors.New("console: Ledger is required")
	}
	if d.Blame == nil {
		d.Blame = blame.New(d.Workspace, d.Ledger)
	}
	p, err := loadPages()
	if err != nil {
		return nil, err
	}
	c := &Console{d: d, mux: http.NewServeMux(), ss: newSessions(sessionSecret(d.Keys), d.Now), pages: p,
		cop: http.NewCrossOriginProtection()}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	c.mux.Handle("GET "+Prefix+"/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		fileServer.ServeHTTP(w, r)
	}))
	c.mux.HandleFunc("GET "+Prefix+"/signin", c.signinPage)
	c.mux.HandleFunc("POST "+Prefix+"/signin", c.signin)
	c.mux.HandleFunc("POST "+Prefix+"/lang", c.setLang)
	c.handle("POST "+Prefix+"/signout", c.signout)
	c.handle("GET "+Prefix+"/{$}", c.agentsPage)
	c.handle("GET "+Prefix+"/agents/{agentId}", c.agentPage)
	c.handle("GET "+Prefix+"/agents/{agentId}/file", c.filePage)
	c.handle("POST "+Prefix+"/agents/{agentId}/file", c.saveFile)
	c.handle("POST "+Prefix+"/agents/{agentId}/file/flags", c.saveFlags)
	c.handle("GET "+Prefix+"/agents/{agentId}/file/history", c.historyPage)
	c.handle("GET "+Prefix+"/agents/{agentId}/file/blame", c.blamePage)
	c.handle("GET "+Prefix+"/agents/{agentId}/file/rollback", c.rollbackConfirm)
	c.handle("POST "+Prefix+"/agents/{agentId}/file/rollback", c.rollback)
	c.handle("GET "+Prefix+"/agents/{agentId}/erase", c.erasePage)
	c.handle("POST "+Prefix+"/agents/{agentId}/erase", c.erase)
	c.handle("GET "+Prefix+"/agents/{agentId}/prompt", c.promptPage)
	c.handle("POST "+Prefix+"/agents/{agentId}/prompt", c.contextPreview)
	c.handle("GET "+Prefix+"/agents/{agentId}/search", c.searchPage)
	c.handle("GET "+Prefix+"/agents/{agentId}/runs", c.runsPage)
	c.handle("GET "+Prefix+"/agents/{agentId}/export", c.export)
	c.handle("POST "+Prefix+"/agents/{agentId}/summarize", c.manualSummarize)
	c.handle("POST "+Prefix+"/agents/{agentId}/emergence", c.manualEmergence)
	c.handle("GET "+Prefix+"/runs", c.allRunsPage)
	c.handle("GET "+Prefix+"/cron", c.cronPage)
	c.handle("POST "+Prefix+"/cron", c.cronCreate)
	c.handle("GET "+Prefix+"/cron/preview", c.cronPreview)
	c.handle("GET "+Prefix+"/cron/{id}", c.cronEditPage)
	c.handle("POST "+Prefix+"/cron/{id}", c.cronUpdate)
	c.handle("GET "+Prefix+"/cron/{id}/delete", c.cronDeleteConfirm)
	c.handle("POST "+Prefix+"/cron/{id}/delete", c.cronDelete)
	c.handle("GET "+Prefix+"/ops", c.opsPage)
	c.handle("POST "+Prefix+"/ops/dlq/{seq}/retry", c.dlqRetry)
	c.handle("GET "+Prefix+"/ops/dlq/{seq}/discard", c.dlqDiscardConfirm)
	c.handle("POST "+Prefix+"/ops/dlq/{seq}/discard", c.dlqDiscard)
	c.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, http.StatusNotFound, c.lang(r).T("err.notfound"))
	})
}

// ServeHTTP implements http.Handler. Every request passes the browser checks first.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusFound)
		return
	}
	if err := c.browserCheck(r); err != nil {
		c.renderError(w, r, http.StatusForbidden, err.Error())
		return
	}
	c.mux.ServeHTTP(w, r)
}

// browserCheck refuses what a foreign page in the user's browser could send: state changes
// from another origin (Sec-Fetch-Site / Origin, net/http's CrossOriginProtection) always,
// and, in no-key mode, any request whose Host is not loopback (DNS rebinding) or whose
// Origin is foreign (as the REST API does, pkg/internal/httpapi/browser.go).
func (c *Console) browserCheck(r *http.Request) error {
	if !c.d.Auth.Enabled() {
		if !httpapi.LoopbackHost(r.Host) {
			return fmt.Errorf("host %q is not allowed: without API keys the console answers only requests addressed to localhost or a loopback address", r.Host)
		}
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			if u, err := url.Parse(o); err != nil || !strings.EqualFold(u.Host, r.Host) {
				return fmt.Errorf("cross-origin request from %q refused", o)
			}
		}
	}
	if err := c.cop.Check(r); err != nil {
		return fmt.Errorf("cross-origin request refused: %v", err)
	}
	return nil
}

// req is one authenticated console request.
type req struct {
	r    *http.Request
	w    http.ResponseWriter
	p    httpapi.Principal
	ss   session
	lang lang
	csrf string
}

type handlerFunc func(q *req) error

// handle registers a page that needs a signed-in caller. A state change (POST) must carry
// the session's CSRF token.
func (c *Console) handle(pattern string, h handlerFunc) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		q, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		if r.Method == http.MethodPost {
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				got = r.PostFormValue("csrf")
			}
			if !c.ss.validToken(q.ss, got) {
				c.renderError(w, r, http.StatusForbidden, q.lang.T("err.csrf"))
				return
			}
		}
		if err := h(q); err != nil {
			c.fail(q, err)
		}
	})
}

// authenticate finds the caller: a valid session whose key the Authenticator still accepts,
// or, in no-key mode, a fresh open session. Otherwise it sends the browser to sign in.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request) (*req, bool) {
	l := c.lang(r)
	ss, ok := c.ss.read(r)
	if !c.d.Auth.Enabled() {
		if !ok {
			ss = session{ID: randomID(), Issued: c.d.Now().Unix()}
			if err := c.ss.write(w, r, ss); err != nil {
				c.renderError(w, r, http.StatusInternalServerError, err.Error())
				return nil, false
			}
			if r.Method == http.MethodPost {
				c.renderError(w, r, http.StatusForbidden, l.T("err.csrf"))
				return nil, false
			}
		}
		return &req{r: r, w: w, p: httpapi.Principal{Open: true}, ss: ss, lang: l, csrf: c.ss.token(ss)}, true
	}
	if ok && ss.Key != "" {
		probe, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "/", nil)
		probe.Header.Set("Authorization", "Bearer "+ss.Key)
		if p, err := c.d.Auth.Authenticate(probe); err == nil {
			return &req{r: r, w: w, p: p, ss: ss, lang: l, csrf: c.ss.token(ss)}, true
		}
	}
	if r.Method == http.MethodGet {
		http.Redirect(w, r, Prefix+"/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	} else {
		c.renderError(w, r, http.StatusUnauthorized, l.T("err.signin"))
	}
	return nil, false
}

// statusError is an error with the status to answer.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func errStatus(status int, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (c *Console) fail(q *req, err error) {
	var se *statusError
	switch {
	case errors.As(err, &se):
		c.renderError(q.w, q.r, se.status, se.msg)
	case errors.Is(err, workspace.ErrNotFound), errors.Is(err, cronjob.ErrNotFound):
		c.renderError(q.w, q.r, http.StatusNotFound, err.Error())
	case errors.Is(err, workspace.ErrInvalid), errors.Is(err, cronjob.ErrInvalid):
		c.renderError(q.w, q.r, http.StatusBadRequest, err.Error())
	case errors.Is(err, context.Canceled):
	default:
		c.d.Log.Error("console request failed", "method", q.r.Method, "path", q.r.URL.Path, "err", err)
		c.renderError(q.w, q.r, http.StatusInternalServerError, err.Error())
	}
}

// agentID parses {agentId} and checks the caller may act for it, exactly as the REST API.
func (q *req) agentID() (int64, error) {
	var id int64
	if _, err := fmt.Sscan(q.r.PathValue("agentId"), &id); err != nil || id <= 0 {
		return 0, errStatus(http.StatusBadRequest, "agent id must be a positive number, got %q", q.r.PathValue("agentId"))
	}
	if !q.p.MayAct(id) {
		return 0, errStatus(http.StatusForbidden, q.lang.T("err.agentscope"), id)
	}
	return id, nil
}

func (q *req) requireAdmin() error {
	if q.p.Open || q.p.Admin {
		return nil
	}
	return errStatus(http.StatusForbidden, "%s", q.lang.T("err.admin"))
}

// scope is the agents the caller may see: nil means every agent.
func (q *req) scope() []int64 {
	p := q.p
	if p.Open || p.AllAgents {
		return nil
	}
	ids := make([]int64, 0, len(p.Agents))
	for id, ok := range p.Agents {
		if ok {
			ids = append(ids, id)
		}
	}
	return ids
}
