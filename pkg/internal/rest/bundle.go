package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/bundle"
	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// MaxImportBytes bounds an import's body (it is spooled to a temporary file).
const MaxImportBytes = 4 << 30

// transferIdle is how long a bundle transfer may stall before the connection is cut: the
// server's read and write timeouts bound whole requests, which a large bundle outlasts, so
// each chunk moves the deadline instead.
const transferIdle = 60 * time.Second

// RegisterBundle adds GET …/export and POST …/import (docs/bundle.md). Both stream, so
// they are raw operations documented by hand. They take a key that may act for the
// agent, as every agent route does.
func RegisterBundle(s *httpapi.Server, svc *bundle.Service, log *slog.Logger) {
	h := bundleHandlers{svc: svc, log: log}
	tags := []string{"Agents"}
	boolParam := func(name, doc string) *huma.Param {
		return &huma.Param{Name: name, In: "query", Description: doc, Schema: &huma.Schema{Type: "boolean", Default: false}}
	}
	ndjson := map[string]*huma.MediaType{bundle.ContentType: {Schema: &huma.Schema{Type: "string",
		Description: "JSON Lines: the manifest, one record per line, the checksums line (docs/bundle.md)."}}}
	s.HandleRawOp(huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/export", OperationID: "exportAgent", Tags: tags,
		Summary: "Export an agent's memory as a bundle",
		Description: "Streams the agent's settings, files (content, enabled, sort order, version) and cron jobs, with history, messages and the run ledger on request, " +
			"as JSON Lines: a manifest first, a checksums line (SHA-256 per kind and overall) last. A bundle without its checksums line was cut short. 404 for an agent never used.",
		Parameters: []*huma.Param{httpapi.AgentParam(),
			boolParam("history", "Include every file's previous versions."),
			boolParam("messages", "Include the stored conversation messages."),
			boolParam("ledger", "Include the run ledger.")},
		Responses: map[string]*huma.Response{"200": {Description: "The bundle", Content: ndjson,
			Headers: map[string]*huma.Param{"Content-Disposition": {Description: "attachment; filename=agent-N-TIME.ndjson", Schema: &huma.Schema{Type: "string"}}}}},
		Errors: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound}}, http.HandlerFunc(h.export))

	report := s.API().OpenAPI().Components.Schemas.Schema(reflect.TypeFor[httpapi.Envelope[bundle.ImportReport]](), true, "ImportReportEnvelope")
	s.HandleRawOp(huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/import", OperationID: "importAgent", Tags: tags,
		Summary: "Import a bundle into an agent",
		Description: "The body is a bundle as …/export writes it. The whole bundle is validated (format version, every record, checksums) before anything is written, " +
			"then applied in one transaction. mode=empty (default) needs an agent never used; mode=merge adds what the agent lacks and fast-forwards a file only when " +
			"the agent's version is among the bundle's previous versions: a newer or different file is a conflict, listed and kept. The same bundle twice: 0 changes. " +
			"A bundle of a newer format version is refused (400, naming the version supported).",
		Parameters: []*huma.Param{httpapi.AgentParam(),
			{Name: "mode", In: "query", Description: "empty: the agent must hold nothing yet (or exactly this bundle); merge: keep what the agent has, report conflicts.",
				Schema: &huma.Schema{Type: "string", Enum: []any{bundle.ModeEmpty, bundle.ModeMerge}, Default: bundle.ModeEmpty}},
			boolParam("dryRun", "Validate and report what would change; write nothing.")},
		RequestBody: &huma.RequestBody{Required: true, Content: ndjson},
		Responses: map[string]*huma.Response{"200": {Description: "What the import did",
			Content: map[string]*huma.MediaType{"application/json": {Schema: report}}}},
		// 415: a body that is not application/x-ndjson (text/plain, a form) is refused before
		// it is read (the browser protections, httpapi.Server.browserCheck).
		Errors: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}},
		http.HandlerFunc(h.importBundle))
}

type bundleHandlers struct {
	svc *bundle.Service
	log *slog.Logger
}

func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, httpapi.BadRequest("%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// bundleAgent reads {agentId}: a bundle is the agent's memory, so only a key that may act
// for the agent exports or imports it; an admin-only key may not (docs/operations.md#api-keys).
func bundleAgent(r *http.Request) (int64, error) { return httpapi.AgentID(r) }

func (h bundleHandlers) export(w http.ResponseWriter, r *http.Request) {
	id, err := bundleAgent(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var inc bundle.Includes
	for name, dst := range map[string]*bool{"history": &inc.History, "messages": &inc.Messages, "ledger": &inc.Ledger} {
		if *dst, err = queryBool(r, name); err != nil {
			writeError(w, err)
			return
		}
	}
	lw := &lazyWriter{w: w, rc: http.NewResponseController(w), header: func(h http.Header) {
		h.Set("Content-Type", bundle.ContentType)
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="agent-%d-%s.ndjson"`, id, time.Now().UTC().Format("20060102T150405Z")))
		h.Set("Cache-Control", "no-store")
	}}
	sum, err := h.svc.Export(r.Context(), lw, id, inc)
	switch {
	case err != nil && !lw.started:
		writeError(w, err)
	case err != nil:
		// The status is sent: the bundle ends without its checksums line, which tells the
		// client (and an import) it is incomplete.
		h.log.Warn("export cut short", "agent", id, "bytes", sum.Bytes, "err", err)
	default:
		h.log.Info("agent exported", "agent", id, "bytes", sum.Bytes, "files", sum.Counts.File, "history", sum.Counts.History,
			"messages", sum.Counts.Message, "runs", sum.Counts.Run)
	}
}

// lazyWriter sends the headers with the first byte, so an error found before it (an agent
// never used) is still answered with its status; every write moves the write deadline.
type lazyWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	header  func(http.Header)
	started bool
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if !l.started {
		l.started = true
		l.header(l.w.Header())
		l.w.WriteHeader(http.StatusOK)
	}
	_ = l.rc.SetWriteDeadline(time.Now().Add(transferIdle))
	return l.w.Write(b)
}

// idleReader moves the read deadline with every read of the body.
type idleReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (i idleReader) Read(b []byte) (int, error) {
	_ = i.rc.SetReadDeadline(time.Now().Add(transferIdle))
	return i.r.Read(b)
}

func (h bundleHandlers) importBundle(w http.ResponseWriter, r *http.Request) {
	id, err := bundleAgent(r)
	if err != nil {
		writeError(w, err)
		return
	}
	dry, err := queryBool(r, "dryRun")
	if err != nil {
		writeError(w, err)
		return
	}
	body := http.MaxBytesReader(w, r.Body, MaxImportBytes)
	rep, err := h.svc.Import(r.Context(), id, idleReader{r: body, rc: http.NewResponseController(w)},
		bundle.ImportOptions{Mode: r.URL.Query().Get("mode"), DryRun: dry})
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = httpapi.Errorf(http.StatusRequestEntityTooLarge, "the bundle exceeds %d bytes", MaxImportBytes)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	h.log.Info("agent imported", "agent", id, "from", rep.SourceAgentID, "mode", rep.Mode, "dryRun", rep.DryRun,
		"changes", rep.Changes, "conflicts", rep.ConflictCount)
	writeJSON(w, http.StatusOK, httpapi.Envelope[bundle.ImportReport]{Code: http.StatusOK, Data: rep})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError answers err in the API's envelope, classified as every route's errors are.
func writeError(w http.ResponseWriter, err error) {
	st, msg := httpapi.Classify(err)
	writeJSON(w, st, map[string]any{"code": st, "msg": msg})
}
