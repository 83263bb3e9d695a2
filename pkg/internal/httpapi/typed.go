package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// Typed operations: a route is a huma operation, a func(ctx, *Input) (*Output, error) whose
// Input struct declares its path, query and header parameters (with their types and limits)
// and its body, and whose Output is a Reply[T] or Versioned[T]. The OpenAPI document is
// generated from those types, so it cannot drift from what the handlers read and answer.
//
// huma runs on the server's own http.ServeMux through an adapter that keeps this
// package's cross-cutting concerns around every operation: authentication (the Principal in
// the context), metrics and tracing labelled by the route pattern, panic recovery. Errors
// keep the spec's envelope {"code":..,"msg":..}: a handler's error goes through Classify,
// and huma's own parameter and body errors are rewritten by newError into a message that
// says what was wrong (and 422 becomes the 400 clients already handle).

// Envelope is the spec's answer, {"code":200,"data":...}.
type Envelope[T any] struct {
	Code int    `json:"code" example:"200" doc:"The HTTP status code, repeated."`
	Msg  string `json:"msg,omitempty" doc:"Empty on success."`
	Data T      `json:"data"`
}

// ErrorEnvelope is the spec's error answer, {"code":404,"msg":"..."}.
type ErrorEnvelope struct {
	Code   int    `json:"code" example:"400" doc:"The HTTP status code, repeated."`
	Msg    string `json:"msg" example:"limit must be 1 to 1000, got \"0\"" doc:"What was wrong and, where it helps, what to do."`
	header http.Header
}

func (e *ErrorEnvelope) Error() string { return e.Msg }

// GetStatus implements huma.StatusError.
func (e *ErrorEnvelope) GetStatus() int { return e.Code }

// GetHeaders implements huma.HeadersError (WWW-Authenticate, Retry-After).
func (e *ErrorEnvelope) GetHeaders() http.Header { return e.header }

// Response is a typed operation's output: a status and the envelope around T.
type Response[T any] struct {
	Status int
	Body   Envelope[T]
}

// OK answers 200 with data.
func OK[T any](data T) *Response[T] { return Answer(http.StatusOK, data) }

// Answer answers status (a 2xx) with data.
func Answer[T any](status int, data T) *Response[T] {
	return &Response[T]{Status: status, Body: Envelope[T]{Code: status, Data: data}}
}

// Versioned is a reply about one workspace file: its version is the ETag, so a client can
// send it back in If-Match.
type Versioned[T any] struct {
	Status int
	ETag   string `header:"ETag" doc:"The file's version, quoted (\"3\"); send it back in If-Match."`
	Body   Envelope[T]
}

// AnswerVersion answers status with data and version as the ETag.
func AnswerVersion[T any](status int, version int64, data T) *Versioned[T] {
	return &Versioned[T]{Status: status, ETag: fmt.Sprintf("%q", fmt.Sprint(version)), Body: Envelope[T]{Code: status, Data: data}}
}

// Metadata keys of an operation (huma.Operation.Metadata).
const (
	// MetaRest names the path parameter that takes the rest of the path, '/' included
	// (a workspace filename): the route is mounted as {name...}.
	MetaRest = "matememory.rest"
	// MetaSuffix marks an operation whose path is the rest route plus "/<suffix>"
	// (…/{filename}/history): ServeMux cannot match a segment after {name...}, so it is
	// served by the rest route when the name ends in "/<suffix>", and documented as its own
	// operation.
	MetaSuffix = "matememory.suffix"
	// MetaAlso lists the other 2xx statuses an operation answers with the same body
	// ([]int: 201 when a PUT created the file, 202 when a wait ran out).
	MetaAlso = "matememory.also"
	// MetaParamDoc adds rules to parameters' schemas in the document only
	// (map[string]func(*huma.Schema), by parameter name): rules the service checks with
	// clearer messages than a pattern mismatch (a workspace filename's pattern).
	MetaParamDoc = "matememory.paramdoc"
	// MetaFallback is the 405 message for a request to the rest route of a suffix
	// operation's method without the suffix (POST on a file).
	MetaFallback = "matememory.fallback"
)

// metaRegistry holds the schema registry in an operation's metadata, for the messages of
// body validation errors.
const metaRegistry = "matememory.registry"

// Register adds a typed operation. op needs Method, Path, OperationID, Summary and Tags;
// Errors lists the statuses the handler itself can answer (400, 401, 413, 415 and 500 are
// added from the route's shape). Parameters and request bodies are validated by huma against
// their declared types and limits, the rules the document states (unknown fields and
// trailing data are refused too); the services then check what no schema can say, with
// messages that say what was wrong.
func Register[I, O any](s *Server, op huma.Operation, h func(context.Context, *I) (*O, error)) {
	if op.MaxBodyBytes == 0 {
		op.MaxBodyBytes = MaxBodyBytes
	}
	op.BodyReadTimeout = -1 // ignored: the server's read timeout applies (serverDeadlines)
	// Bodies are validated by huma against the schema the document shows (types, required
	// fields, limits), so the two cannot differ; the registry lets the error messages name
	// each rule. An operation whose body no schema describes sets SkipValidateBody itself.
	op.Metadata = maps.Clone(op.Metadata)
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[metaRegistry] = s.api.OpenAPI().Components.Schemas
	in := reflect.TypeFor[I]()
	errs := map[int]bool{http.StatusInternalServerError: true}
	if strings.HasPrefix(op.Path, "/api/") {
		errs[http.StatusUnauthorized] = true
	}
	if in.NumField() > 0 {
		errs[http.StatusBadRequest] = true
	}
	if _, ok := in.FieldByName("Body"); ok {
		errs[http.StatusRequestEntityTooLarge] = true
		errs[http.StatusUnsupportedMediaType] = true
	}
	for _, c := range op.Errors {
		errs[c] = true
	}
	op.Errors = slices.Sorted(maps.Keys(errs))
	huma.Register(s.api, op, func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if err != nil {
			return nil, s.errorEnvelope(op, err)
		}
		return out, nil
	})
}

// errorEnvelope classifies a handler's error into the envelope (with the headers it carries:
// WWW-Authenticate, Retry-After) and logs server errors.
func (s *Server) errorEnvelope(op huma.Operation, err error) error {
	st, msg, header := classify(err)
	if st >= 500 {
		s.log.Error("request failed", "operation", op.OperationID, "err", err)
	}
	return &ErrorEnvelope{Code: st, Msg: msg, header: header}
}

// API is the server's huma API, for operations registered by hand (huma.Register) and for
// reading the OpenAPI document (API().OpenAPI()).
func (s *Server) API() huma.API { return s.api }

// docAPI documents operations without huma's 422: validation errors are answered 400.
type docAPI struct{ huma.API }

func (d docAPI) DocumentOperation(op *huma.Operation) {
	delete(op.Responses, "422")
	for _, r := range op.Responses {
		// Errors are documented as huma's error model, whose schema is the envelope's
		// (newAPI) and whose content type is answered as JSON (serverDeadlines).
		if mt, ok := r.Content[problemJSON]; ok {
			delete(r.Content, problemJSON)
			r.Content["application/json"] = mt
		}
	}
	if docs, _ := op.Metadata[MetaParamDoc].(map[string]func(*huma.Schema)); docs != nil {
		for i, p := range op.Parameters {
			if f := docs[p.Name]; f != nil && p.Schema != nil {
				// A copy: the schema huma validates the parameter with stays as declared.
				pc, sc := *p, *p.Schema
				f(&sc)
				pc.Schema = &sc
				op.Parameters[i] = &pc
			}
		}
	}
	also, _ := op.Metadata[MetaAlso].([]int)
	if def := op.Responses[strconv.Itoa(op.DefaultStatus)]; def != nil {
		for _, c := range also {
			r := *def
			r.Description = http.StatusText(c)
			op.Responses[strconv.Itoa(c)] = &r
		}
	}
	if !op.Hidden {
		d.OpenAPI().AddOperation(op)
	}
}

func newAPI(s *Server) huma.API {
	registry := &arrays{Registry: huma.NewMapRegistry("#/components/schemas/", schemaName), nullable: map[*huma.Schema]map[string]bool{}}
	s.arrays = registry
	registry.RegisterTypeAlias(reflect.TypeFor[huma.ErrorModel](), reflect.TypeFor[ErrorEnvelope]())
	cfg := huma.Config{
		OpenAPI: &huma.OpenAPI{
			OpenAPI: "3.1.0",
			Info: &huma.Info{Title: "MateMemory API", Version: "1",
				Description: "Agent memory over REST: workspace files with versions, conversation messages, memory search, the context window, the extraction pipeline and cron jobs. " +
					"Every answer is the envelope `{\"code\":200,\"data\":...}` (errors: `{\"code\":404,\"msg\":\"...\"}`), its code the HTTP status; an error's message says what was wrong. " +
					"Generated from the handlers' Go types; see docs/api.md in the repository."},
			Servers: []*huma.Server{{URL: "http://127.0.0.1:8080", Description: "The all-in-one service on its default address (make run)"}},
			Components: &huma.Components{
				Schemas: registry,
				SecuritySchemes: map[string]*huma.SecurityScheme{"bearer": {Type: "http", Scheme: "bearer",
					Description: "An API key from mate.auth.keys (MATE_AUTH_KEYS), scoped to agents or admin. Without configured keys (loopback development mode) none is needed."}},
			},
			Security: []map[string][]string{{"bearer": {}}},
			Tags:     apiTags(),
		},
		Formats:       map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat},
		DefaultFormat: "application/json",
		Transformers:  []huma.Transformer{envelopeErrors},
	}
	return docAPI{huma.NewAPI(cfg, adapter{s})}
}

// schemaName names a Go type's schema after its package and name (ConversationMessage,
// WindowMessage), so two types of one name in two packages do not collide; this package's
// and the REST handlers' own types keep their bare names.
func schemaName(t reflect.Type, hint string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if name == "" {
		name = hint
	}
	name = strings.ReplaceAll(name, "[]", "List[")
	name = strings.ReplaceAll(name, "interface {}", "Any")
	name = strings.ReplaceAll(name, "struct {}", "Empty")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '[' || r == ']' || r == '*' || r == ',' }) {
		pkg, base := "", part
		if i := strings.LastIndex(part, "."); i >= 0 {
			pkg, base = part[:i], part[i+1:]
			pkg = pkg[strings.LastIndex(pkg, "/")+1:]
		}
		if t.PkgPath() != "" && !strings.Contains(name, ".") && part == name {
			pkg = t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
		}
		if n, ok := documentedNames[pkg+"."+base]; ok {
			b.WriteString(n)
			continue
		}
		switch pkg {
		case "", "httpapi", "rest", "api", "time", "json":
			pkg = ""
		}
		b.WriteString(upperFirst(pkg))
		b.WriteString(upperFirst(base))
	}
	// Component names allow [A-Za-z0-9._-] only.
	return strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return r
		}
		return -1
	}, b.String())
}

// documentedNames keeps the component names the document gave types before they moved
// into the REST port (rest) or the shared wire types (pkg/api): the generated TypeScript
// and Python clients name their types after them, so a move must not rename a schema.
var documentedNames = map[string]string{
	"rest.JobList":            "CronjobJobList",
	"rest.JobDeleted":         "CronjobJobDeleted",
	"rest.cronCreateBody":     "CronjobCreateBody",
	"rest.cronReplaceBody":    "CronjobReplaceBody",
	"rest.cronPatchBody":      "CronjobPatchBody",
	"rest.contextBody":        "WindowContextBody",
	"rest.SummarizeResult":    "SummarizerSummarizeResult",
	"rest.RunList":            "SummarizerRunList",
	"api.File":                "WorkspaceFile",
	"api.FileInfo":            "WorkspaceInfo",
	"api.HistoryEntry":        "WorkspaceHistoryEntry",
	"api.Budgets":             "WorkspaceAgentBudgets",
	"api.OverBudget":          "WorkspaceOverBudget",
	"api.CronJob":             "CronjobJob",
	"api.DeadLetter":          "SummarizerDeadLetter",
	"api.RetriedLetter":       "BusRetried",
	"api.MemoryHit":           "RecallHit",
	"api.MemoryStated":        "RecallStated",
	"api.MemorySearchResult":  "RecallResult",
	"api.Run":                 "LedgerRun",
	"api.ChatMessage":         "WindowMessage",
	"api.ToolCall":            "WindowToolCall",
	"api.FunctionCall":        "WindowFunctionCall",
	"api.ContextTokens":       "WindowTokens",
	"api.ContextRecall":       "WindowRecallInfo",
	"api.WorkspaceCut":        "WindowWorkspaceCut",
	"api.ContextResult":       "WindowResult",
	"api.StoredMessage":       "ConversationMessage",
	"api.MessagePage":         "Messages",
	"api.Pending":             "SummarizerPending",
	"api.PendingLease":        "SummarizerPendingLease",
	"api.PendingCooldown":     "SummarizerPendingCooldown",
	"api.PendingWaiter":       "SummarizerPendingWaiter",
	"api.PendingEvent":        "SummarizerPendingEvent",
	"api.PendingConversation": "SummarizerPendingConversation",
	"rest.DeadLetters":        "SummarizerDeadLetters",
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// apiTags are the document's tags, in the order the reference shows them.
func apiTags() []*huma.Tag {
	return []*huma.Tag{
		{Name: "Workspace", Description: "An agent's memory files: read, write with compare-and-swap (If-Match), history and rollback, and the system-prompt injection."},
		{Name: "Agents", Description: "Agents and their settings."},
		{Name: "Messages", Description: "Conversation messages, the short-term history chat services store."},
		{Name: "Recall", Description: "Search over an agent's memory files."},
		{Name: "Tools", Description: "The workspace memory tools as OpenAI function definitions, and their execution."},
		{Name: "Context", Description: "The context window assembled before an LLM call."},
		{Name: "Pipeline", Description: "Conversation-completed events, manual extraction and consolidation, the run ledger."},
		{Name: "Cron jobs", Description: "Scheduled memory tasks."},
		{Name: "Admin", Description: "Operator endpoints (an admin key): dead letters."},
		{Name: "MateClaw", Description: "MateClaw-compatible workspace routes (WorkspaceFileController): same service, MateClaw's paths and field names, 200 on create."},
		{Name: "MCP", Description: "The Model Context Protocol over streamable HTTP."},
		{Name: "Service", Description: "Health, readiness, metrics and this document."},
	}
}

// jsonFormat writes JSON without HTML escaping and reads request bodies strictly.
var jsonFormat = huma.Format{
	Marshal: func(w io.Writer, v any) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	},
	Unmarshal: decodeStrict,
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return withAccepted(data, v, err)
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// withAccepted adds to an unknown top-level field's error the fields the body accepts, so a
// caller who guessed a name ("limit" for maxResults) learns the right one.
func withAccepted(data []byte, v any, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return err
	}
	name, _ = strconv.Unquote(name)
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return err
	}
	if _, ok := top[name]; !ok {
		return err // a nested object's field: the top level's names would mislead
	}
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return err
	}
	var fields []string
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !f.IsExported():
		case tag != "":
			fields = append(fields, tag)
		case !f.Anonymous:
			fields = append(fields, f.Name)
		}
	}
	if len(fields) == 0 {
		return err
	}
	return fmt.Errorf("%w; accepted: %s", err, strings.Join(fields, ", "))
}

// adapter mounts huma operations on the server's ServeMux, wrapped in its concerns.
type adapter struct{ s *Server }

func (a adapter) Handle(op *huma.Operation, h func(huma.Context)) {
	serve := actingFor(op.Path, singleValued(queryNames(op), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(serverDeadlines{humago.NewContext(op, r, w)})
	}), func(w http.ResponseWriter, _ *http.Request, err error) { writeErr(w, err) }))
	path := op.Path
	rest, _ := op.Metadata[MetaRest].(string)
	sfx, _ := op.Metadata[MetaSuffix].(string)
	if sfx != "" {
		path = strings.TrimSuffix(path, "/"+sfx)
	}
	if rest != "" {
		path = strings.Replace(path, "{"+rest+"}", "{"+rest+"...}", 1)
	}
	d := a.s.dispatcher(op.Method+" "+path, rest)
	label := op.Method + " " + op.Path
	if rest != "" && sfx == "" {
		label = op.Method + " " + path
	}
	public, _ := op.Metadata[MetaPublic].(bool)
	hh := a.s.instrument(label, public, serve)
	if sfx == "" {
		d.base = hh
		return
	}
	d.suffixes = append(d.suffixes, suffixRoute{sfx: sfx, h: hh})
	if msg, _ := op.Metadata[MetaFallback].(string); msg != "" {
		d.fallback = a.s.instrument(op.Method+" "+path, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fail(w, http.StatusMethodNotAllowed, msg)
		}))
	}
}

func (a adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.s.ServeHTTP(w, r) }

// serverDeadlines keeps the http.Server's read timeout in force: huma would replace it with
// a per-operation body deadline (or clear it), letting a client that trickles its body hold
// the connection.
type serverDeadlines struct{ humaContext }

// humaContext names the embedded context (huma.Context has a method called Context).
type humaContext = huma.Context

func (serverDeadlines) SetReadDeadline(time.Time) error { return nil }

// SetStatus answers huma's 422 (a body that breaks its schema) as the 400 clients handle.
func (c serverDeadlines) SetStatus(code int) {
	if code == http.StatusUnprocessableEntity {
		code = http.StatusBadRequest
	}
	c.humaContext.SetStatus(code)
}

// SetHeader writes huma's error model, which asks for application/problem+json, as the
// envelope's JSON (envelopeErrors).
func (c serverDeadlines) SetHeader(name, value string) {
	if strings.EqualFold(name, "Content-Type") && value == problemJSON {
		value = "application/json"
	}
	c.humaContext.SetHeader(name, value)
}

// problemJSON is the content type huma's ErrorModel asks for.
const problemJSON = "application/problem+json"

// Unwrap gives humago.Unwrap the request and writer.
func (c serverDeadlines) Unwrap() huma.Context { return c.humaContext }

// dispatch serves one mux pattern: the operation itself and, for a rest pattern, the
// operations on its suffixes.
type dispatch struct {
	rest     string
	base     http.Handler
	fallback http.Handler
	suffixes []suffixRoute
}

type suffixRoute struct {
	sfx string
	h   http.Handler
}

func (d *dispatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.rest != "" {
		name := r.PathValue(d.rest)
		for _, s := range d.suffixes {
			if base, ok := strings.CutSuffix(name, "/"+s.sfx); ok && base != "" {
				r.SetPathValue(d.rest, base)
				s.h.ServeHTTP(w, r)
				return
			}
		}
	}
	switch {
	case d.base != nil:
		d.base.ServeHTTP(w, r)
	case d.fallback != nil:
		d.fallback.ServeHTTP(w, r)
	default:
		fail(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s; see /api/v1/openapi.json", r.Method, r.URL.Path))
	}
}

func (s *Server) dispatcher(pattern, rest string) *dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.dispatch[pattern]; ok {
		return d
	}
	d := &dispatch{rest: rest}
	s.dispatch[pattern] = d
	s.mux.Handle(pattern, d)
	return d
}

// instrument wraps an operation in the server's concerns: a span and metrics labelled by
// label, authentication, panic recovery.
func (s *Server) instrument(label string, public bool, h http.Handler) http.Handler {
	return s.trace(label, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		code := s.serve(sw, r, public, h)
		s.reqs.WithLabelValues(label, fmt.Sprint(code)).Inc()
		s.latency.WithLabelValues(label).Observe(time.Since(start).Seconds())
	}))
}

func (s *Server) serve(w *statusWriter, r *http.Request, public bool, h http.Handler) (code int) {
	defer func() {
		if rec := recover(); rec != nil {
			s.guard.Report("http", rec, "method", r.Method, "path", r.URL.Path)
			if w.code == 0 {
				fail(w, http.StatusInternalServerError, "internal error")
			}
			code = http.StatusInternalServerError
		}
	}()
	if !public {
		p, err := s.auth.Authenticate(r)
		if err != nil {
			return writeErr(w, err)
		}
		r = r.WithContext(withPrincipal(r.Context(), p))
	}
	h.ServeHTTP(w, r)
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// statusWriter records the status an operation answered.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// huma builds its own errors (a parameter that is not an integer, a body it cannot read) as
// its ErrorModel, through the process-wide huma.NewError. This API leaves that function
// alone (other huma APIs in the process keep theirs) and rewrites the model where it is
// written instead: envelopeErrors turns it into the envelope with a clear message,
// serverDeadlines answers its 422 as 400 and its problem+json as JSON, and the schema
// registry documents it as the ErrorEnvelope (newAPI).

// envelopeErrors is the API's transformer: huma's ErrorModel becomes the envelope.
func envelopeErrors(ctx huma.Context, _ string, v any) (any, error) {
	m, ok := v.(*huma.ErrorModel)
	if !ok {
		return v, nil
	}
	errs := make([]error, 0, len(m.Errors))
	for _, d := range m.Errors {
		if d != nil {
			errs = append(errs, d)
		}
	}
	return newError(ctx.Operation(), m.Status, m.Detail, errs...), nil
}

func newError(op *huma.Operation, status int, msg string, errs ...error) huma.StatusError {
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	var parts []string
	for _, err := range errs {
		if err == nil {
			continue
		}
		var d *huma.ErrorDetail
		if errors.As(err, &d) && d.Location != "" {
			parts = append(parts, detailMessage(op, d))
			continue
		}
		if d != nil {
			parts = append(parts, d.Message) // an error huma carried as a bare detail
			continue
		}
		parts = append(parts, err.Error())
	}
	switch {
	case status == http.StatusRequestEntityTooLarge:
		limit := int64(MaxBodyBytes)
		if op != nil && op.MaxBodyBytes > 0 {
			limit = op.MaxBodyBytes
		}
		msg = fmt.Sprintf("request body exceeds %d bytes", limit)
	case msg == "request body is required":
		msg = "request body is empty; expected a JSON object"
	case len(parts) > 0:
		msg = strings.Join(parts, "; ")
	}
	return &ErrorEnvelope{Code: status, Msg: msg}
}

// detailMessage turns one of huma's validation details into a sentence naming the
// parameter, its rule and the value received.
func detailMessage(op *huma.Operation, d *huma.ErrorDetail) string {
	where, name, _ := strings.Cut(d.Location, ".")
	if where == "body" {
		return bodyMessage(op, name, d)
	}
	var sch *huma.Schema
	if op != nil {
		for _, p := range op.Parameters {
			if p.In == where && p.Name == name {
				sch = p.Schema
			}
		}
	}
	got := fmt.Sprint(d.Value)
	if d.Value == nil {
		got = ""
	}
	if sch == nil {
		return fmt.Sprintf("%s (%s): %s", name, where, d.Message)
	}
	if strings.Contains(d.Message, "required") {
		return fmt.Sprintf("%s parameter %s is required", where, name)
	}
	if msg := ruleMessage(name, sch, d.Message, fmt.Sprintf("%q", got), got); msg != "" {
		return msg
	}
	return fmt.Sprintf("%s (%s) %s, got %q", name, where, d.Message, got)
}

// ruleMessage says which of sch's rules the value broke, or "" when it is none of those it
// knows: quoted is the value as the message shows it, raw as a length is counted on.
func ruleMessage(name string, sch *huma.Schema, rule, quoted, raw string) string {
	switch {
	case len(sch.Enum) > 0:
		accepted := make([]string, len(sch.Enum))
		for i, e := range sch.Enum {
			accepted[i] = fmt.Sprint(e)
		}
		return fmt.Sprintf("%s %s is not supported; accepted: %s", name, quoted, strings.Join(accepted, ", "))
	case sch.Type == "integer":
		switch {
		case sch.Minimum != nil && sch.Maximum != nil:
			return fmt.Sprintf("%s must be %v to %v, got %s", name, *sch.Minimum, *sch.Maximum, quoted)
		case sch.Minimum != nil && *sch.Minimum == 1:
			return fmt.Sprintf("%s must be a positive integer, got %s", name, quoted)
		case sch.Minimum != nil:
			return fmt.Sprintf("%s must be a whole number of at least %v, got %s", name, *sch.Minimum, quoted)
		}
		return fmt.Sprintf("%s must be an integer, got %s", name, quoted)
	case sch.Type == "boolean":
		return fmt.Sprintf("%s must be true or false, got %s", name, quoted)
	case sch.Type == "string" && (sch.MinLength != nil || sch.MaxLength != nil) && strings.Contains(rule, "length"):
		lo, hi := 0, 0
		if sch.MinLength != nil {
			lo = *sch.MinLength
		}
		if sch.MaxLength != nil {
			hi = *sch.MaxLength
			return fmt.Sprintf("%s must be %d to %d characters long, got %d", name, lo, hi, utf8.RuneCountInString(raw))
		}
		return fmt.Sprintf("%s must be at least %d characters long, got %d", name, lo, utf8.RuneCountInString(raw))
	}
	return ""
}

// bodyMessage turns a validation detail of the request body (at path: "", "opts",
// "messages[0].content") into a sentence naming the field, its rule and the value received.
func bodyMessage(op *huma.Operation, path string, d *huma.ErrorDetail) string {
	parent := bodySchema(op, path)
	if prop, ok := strings.CutPrefix(d.Message, "expected required property "); ok {
		prop = strings.TrimSuffix(prop, " to be present")
		return joinPath(path, prop) + " is required"
	}
	if path == "" {
		// Not a rule of the schema: the body is no JSON, or more than one value.
		return "invalid JSON body: " + d.Message
	}
	base := parentPath(path)
	if d.Message == "unexpected property" {
		msg := fmt.Sprintf("unknown field %q", path)
		if up := bodySchema(op, base); up != nil && len(up.Properties) > 0 {
			msg += "; accepted: " + strings.Join(slices.Sorted(maps.Keys(up.Properties)), ", ")
		}
		return msg
	}
	got, _ := json.Marshal(d.Value)
	raw := fmt.Sprint(d.Value)
	sch := parent
	if sch == nil {
		return fmt.Sprintf("%s: %s, got %s", path, d.Message, got)
	}
	if what, ok := strings.CutPrefix(d.Message, "expected "); ok && slices.Contains([]string{"string", "integer", "number", "boolean", "array", "object"}, what) {
		article := "a"
		if what == "integer" || what == "array" || what == "object" {
			article = "an"
		}
		orNull := ""
		if sch.Nullable {
			orNull = " or null"
		}
		return fmt.Sprintf("%s must be %s %s%s, got %s", path, article, what, orNull, got)
	}
	if msg := ruleMessage(path, sch, d.Message, string(got), raw); msg != "" {
		return msg
	}
	return fmt.Sprintf("%s %s, got %s", path, d.Message, got)
}

// bodySchema resolves the schema of the body at path ("" is the body itself).
func bodySchema(op *huma.Operation, path string) *huma.Schema {
	if op == nil || op.RequestBody == nil || op.RequestBody.Content["application/json"] == nil {
		return nil
	}
	reg, _ := op.Metadata[metaRegistry].(huma.Registry)
	deref := func(s *huma.Schema) *huma.Schema {
		for s != nil && s.Ref != "" && reg != nil {
			s = reg.SchemaFromRef(s.Ref)
		}
		return s
	}
	sch := deref(op.RequestBody.Content["application/json"].Schema)
	for _, tok := range pathTokens(path) {
		if sch == nil {
			return nil
		}
		if tok == "[]" {
			sch = deref(sch.Items)
			continue
		}
		sch = deref(sch.Properties[tok])
	}
	return sch
}

// pathTokens splits "messages[0].tool_calls[1].id" into messages, [], tool_calls, [], id.
func pathTokens(path string) []string {
	var out []string
	for _, part := range strings.Split(path, ".") {
		if part == "" {
			continue
		}
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for ; rest != ""; _, rest, _ = strings.Cut(rest, "[") {
			out = append(out, "[]")
		}
	}
	return out
}

// parentPath is the path of the object holding the last field of path.
func parentPath(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// Optional marks fields of t's schema as optional in requests: fields the service fills in
// when absent (an event's id and time) in a type whose package carries no OpenAPI tags.
func Optional(s *Server, t reflect.Type, fields ...string) {
	sch := MayOmit(s, t, fields...)
	if sch == nil {
		return
	}
	for _, f := range fields {
		if sch.Properties[f] != nil {
			sch.Properties[f].Description = strings.TrimSpace(sch.Properties[f].Description + " Filled in by the server when absent.")
		}
	}
}

// ProtocolErrors is implemented by a raw operation's handler that speaks a protocol of its
// own (MCP's JSON-RPC): the refusals the server makes before the handler runs for a reason
// of that protocol's transport (the browser protections: Origin, Host, a body that is not
// JSON) are then written by WriteProtocolError instead of as the API's envelope, so the
// client reads them as its protocol says. Authentication keeps the envelope.
type ProtocolErrors interface {
	WriteProtocolError(w http.ResponseWriter, r *http.Request, status int, msg string)
}

// HandleRawOp registers a plain http.Handler (a protocol of its own, like MCP) behind
// authentication, documented by op: the statuses in op.Errors that op.Responses does not
// describe get the error envelope (401 always).
func (s *Server) HandleRawOp(op huma.Operation, h http.Handler) {
	pattern := op.Method + " " + op.Path
	s.mux.Handle(pattern, s.instrument(pattern, false, actingFor(op.Path, singleValued(queryNames(&op), h, s.refuse))))
	if op.Responses == nil {
		op.Responses = map[string]*huma.Response{}
	}
	ref := SchemaRef[ErrorEnvelope](s)
	for _, c := range append([]int{http.StatusUnauthorized}, op.Errors...) {
		if op.Responses[fmt.Sprint(c)] == nil {
			op.Responses[fmt.Sprint(c)] = &huma.Response{Description: http.StatusText(c),
				Content: map[string]*huma.MediaType{"application/json": {Schema: ref}}}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pe, ok := h.(ProtocolErrors); ok {
		s.protocolErrors[pattern] = pe
	}
	s.api.OpenAPI().AddOperation(&op)
}

// SchemaRef registers T's schema in the document's components and returns a reference to
// it, for raw operations that document the Go types they write.
func SchemaRef[T any](s *Server) *huma.Schema {
	return s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[T](), true, "")
}

// refuse answers one of the server's own refusals: in the route's protocol when its handler
// writes ProtocolErrors, else as the envelope.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mu.Lock()
		pe := s.protocolErrors[pattern]
		s.mu.Unlock()
		if pe != nil {
			st, msg := Classify(err)
			pe.WriteProtocolError(w, r, st, msg)
			return
		}
	}
	writeErr(w, err)
}

// AgentParam documents the {agentId} path parameter of a raw operation.
func AgentParam() *huma.Param {
	one := 1.0
	return &huma.Param{Name: "agentId", In: "path", Required: true, Example: 1,
		Description: "The agent's id, a positive integer; the key must be allowed to act for it.",
		Schema:      &huma.Schema{Type: "integer", Format: "int64", Minimum: &one}}
}

// Flush lets streaming handlers (MCP's event streams) flush through the recorder.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// MayOmit marks fields of t's schema as not required: a request may leave them out (a type
// whose package carries no OpenAPI tags). It returns the schema, nil when t has none.
func MayOmit(s *Server, t reflect.Type, fields ...string) *huma.Schema {
	sch := s.component(t)
	if sch == nil {
		return nil
	}
	keep := sch.Required[:0]
	for _, f := range sch.Required {
		if !slices.Contains(fields, f) {
			keep = append(keep, f)
		}
	}
	sch.Required = keep
	sch.PrecomputeMessages() // huma validates against the precomputed required set
	return sch
}

// Nullable marks fields of t's schema as nullable: a type whose MarshalJSON writes null for
// them (an OpenAI assistant message that only calls tools has "content": null), or a request
// field a client may send as null. An array field is nullable only this way (see arrays).
func Nullable(s *Server, t reflect.Type, fields ...string) {
	sch := s.component(t)
	if sch == nil {
		return
	}
	for _, f := range fields {
		if p := sch.Properties[f]; p != nil {
			p.Nullable = true
			s.arrays.allowNull(sch, f)
		}
	}
}

// arrays is the document's schema registry with one rule of its own: huma types every
// slice field nullable, but the service answers [] for an empty list (the handlers never
// send a nil slice), so an array property is not nullable unless Nullable says so (a
// request field a client may send as null).
type arrays struct {
	huma.Registry
	mu       sync.Mutex
	nullable map[*huma.Schema]map[string]bool
}

// Schema registers t (and what it holds) and clears huma's nullable on array properties.
func (a *arrays) Schema(t reflect.Type, allowRef bool, hint string) *huma.Schema {
	s := a.Registry.Schema(t, allowRef, hint)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.Registry.Map() {
		for name, p := range c.Properties {
			if p != nil && p.Type == "array" && p.Nullable && !a.nullable[c][name] {
				p.Nullable = false
			}
		}
	}
	return s
}

// MarshalJSON writes the components, as huma's own registry does.
func (a *arrays) MarshalJSON() ([]byte, error) { return json.Marshal(a.Registry.Map()) }

// MarshalYAML writes the components, as huma's own registry does.
func (a *arrays) MarshalYAML() (any, error) { return a.Registry.Map(), nil }

func (a *arrays) allowNull(c *huma.Schema, field string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nullable[c] == nil {
		a.nullable[c] = map[string]bool{}
	}
	a.nullable[c][field] = true
}

// component registers t and returns its schema in the document's components.
func (s *Server) component(t reflect.Type) *huma.Schema {
	reg := s.api.OpenAPI().Components.Schemas
	ref := reg.Schema(t, true, "")
	if ref.Ref == "" {
		return nil
	}
	return reg.SchemaFromRef(ref.Ref)
}
