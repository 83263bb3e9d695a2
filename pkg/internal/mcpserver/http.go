package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/panics"
)

// Path is where the API serves MCP for the agent in {agentId}.
const Path = "/api/v1/agents/{agentId}/mcp"

// Tools is what the HTTP handler needs from the WorkspaceMemoryTool; *tool.Tools satisfies it.
type Tools interface {
	Caller
	DefaultLanguage() string
}

// HTTPOptions configure the streamable HTTP handler.
type HTTPOptions struct {
	// Hub, when set, hears of workspace changes; the handler's servers then notify their
	// listening sessions.
	Hub *Hub
	// CORSOrigins are the browser origins allowed to send requests (mate.http.cors-origins).
	// A request with any other Origin header is refused with 403.
	CORSOrigins []string
	// KeysEnabled tells that API keys are configured. Without keys the server's own
	// loopback origin is accepted too (as the rest of the API does).
	KeysEnabled bool
	// Log receives SDK diagnostics; nil discards them.
	Log *slog.Logger
	// Guard recovers, logs and counts panics in the servers' method handlers.
	Guard *panics.Guard
}

// maxCachedServers bounds the per-agent server cache; past it, servers without a session
// are dropped (a server is cheap to rebuild).
const maxCachedServers = 4096

// Handler serves MCP over streamable HTTP. It must run behind httpapi's authentication
// (Register mounts it with HandleRawOp): it checks the caller may act for the agent in the
// path (403 otherwise) and hands the request to a server bound to that agent.
//
// Requests are served statelessly (no Mcp-Session-Id): every request is authorized and bound
// on its own, and any API replica can answer it. Clients of the stateless protocol
// (2026-07-28 and later) receive notifications on their subscriptions/listen streams. A
// client that starts with the initialize handshake (protocol 2025-11-25 and older) gets a
// session instead, so it can open the GET event stream notifications are sent on: the
// session is kept by this replica (idle ones close after SessionIdleTimeout), and it is
// served only to requests for the same agent, language and API key that created it (any
// other gets 404, as for an unknown session).
type Handler struct {
	tools    Tools
	opts     HTTPOptions
	cors     map[string]bool
	sdk      *mcp.StreamableHTTPHandler // stateless
	sessions *mcp.StreamableHTTPHandler // initialize-based clients

	mu      sync.Mutex
	servers map[binding]*Server
	owners  map[string]owner // session id → who created it
}

// SessionIdleTimeout closes a session that received no request for that long.
const SessionIdleTimeout = 30 * time.Minute

// owner is the binding and API key a session was created with.
type owner struct {
	binding binding
	keyID   string
	seen    time.Time
}

// binding is the agent and description language a request is served with.
type binding struct {
	agentID  int64
	language string
}

type bindingKey struct{}

// NewHandler builds the streamable HTTP handler.
func NewHandler(t Tools, o HTTPOptions) *Handler {
	if o.Hub == nil {
		o.Hub = NewHub()
	}
	h := &Handler{tools: t, opts: o, cors: map[string]bool{}, servers: map[binding]*Server{}, owners: map[string]owner{}}
	for _, origin := range o.CORSOrigins {
		if origin = strings.TrimRight(strings.TrimSpace(origin), "/"); origin != "" {
			h.cors[strings.ToLower(origin)] = true
		}
	}
	// httpapi guards against DNS rebinding already (without keys it answers only loopback
	// Host names), and the SDK's own check would refuse a reverse proxy on the same machine
	// that forwards to 127.0.0.1 with the public Host.
	h.sdk = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		DisableLocalhostProtection: true,
		// Plain JSON replies to single requests; subscriptions/listen streams are SSE.
		JSONResponse:        true,
		Logger:              sdkLogger(o.Log),
		MaxRequestBodyBytes: httpapi.MaxBodyBytes,
	})
	h.sessions = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		DisableLocalhostProtection: true,
		JSONResponse:               true,
		Logger:                     sdkLogger(o.Log),
		MaxRequestBodyBytes:        httpapi.MaxBodyBytes,
		SessionTimeout:             SessionIdleTimeout,
	})
	return h
}

// Register mounts the handler at Path on s, behind s's authentication, and documents what
// each method answers: JSON-RPC error objects (RPCErrorResponse) for the protocol's and the
// transport's refusals, the API's envelope for authentication, the agent id and the language.
func Register(s *httpapi.Server, t Tools, o HTTPOptions) *Handler {
	h := NewHandler(t, o)
	tags := []string{"MCP"}
	params := []*huma.Param{httpapi.AgentParam(),
		{Name: "language", In: "query", Description: "The language of the tool descriptions.", Schema: &huma.Schema{Type: "string", Enum: []any{"zh", "en"}}}}
	session := &huma.Param{Name: "Mcp-Session-Id", In: "header", Description: "The session an initialize handshake created.", Schema: &huma.Schema{Type: "string"}}
	rpcErr, envelope := httpapi.SchemaRef[RPCErrorResponse](s), httpapi.SchemaRef[httpapi.ErrorEnvelope](s)
	// answer documents an error status: a JSON-RPC error, or (either) the API's envelope.
	answer := func(desc string, withEnvelope bool) *huma.Response {
		sch := rpcErr
		if withEnvelope {
			sch = &huma.Schema{OneOf: []*huma.Schema{rpcErr, envelope}}
		}
		return &huma.Response{Description: desc, Content: map[string]*huma.MediaType{"application/json": {Schema: sch}}}
	}
	allow := map[string]*huma.Param{"Allow": {Description: "POST: the only method without a session.", Schema: &huma.Schema{Type: "string"}}}
	responses := func(extra map[string]*huma.Response) map[string]*huma.Response {
		r := map[string]*huma.Response{
			"400": answer("A JSON-RPC error (invalid request, unsupported protocol version), or the envelope for an agent id or language the API refuses", true),
			"403": answer("The envelope when the key may not act for the agent; a JSON-RPC error without id for a foreign Origin or, without API keys, a Host that is not loopback", true),
			"404": answer("A JSON-RPC error: an Mcp-Session-Id this replica does not know or that another agent, language or key created; under the 2026-07-28 protocol also an unknown method (SEP-2575)", false),
			"500": answer("An internal error: the envelope before the MCP server ran, a JSON-RPC error after", true),
		}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	body := func(desc string) map[string]*huma.MediaType {
		return map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: "object", Description: desc}}}
	}
	stream := map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: "string", Description: "Server-sent events carrying JSON-RPC messages."}}}
	notAcceptable := answer("A JSON-RPC error: the Accept header does not cover both application/json and text/event-stream (a wildcard that covers them, */*, is accepted)", false)
	s.HandleRawOp(huma.Operation{Method: http.MethodPost, Path: Path, OperationID: "mcpMessage", Tags: tags,
		Summary: "Model Context Protocol over streamable HTTP",
		Description: "The workspace memory tools and the memory files as resources, bound to the agent in the URL. Stateless (any replica answers); an initialize handshake gets a session. " +
			"A JSON-RPC error of a request (-32601 method not found, -32602 invalid params) is a 200 answer, as any other JSON-RPC response; the transport's refusals have their HTTP status and a JSON-RPC error body; authentication and the agent id keep the API's envelope.",
		Parameters:  append(params, session),
		RequestBody: &huma.RequestBody{Required: true, Content: body("A JSON-RPC 2.0 request, notification or response (MCP).")},
		Responses: responses(map[string]*huma.Response{
			"200": {Description: "A JSON-RPC response (a result or an error), an array of them answering a batch (a request without MCP-Protocol-Version, read as 2025-03-26, may send one), or a stream of them", Content: map[string]*huma.MediaType{
				"application/json": {Schema: &huma.Schema{OneOf: []*huma.Schema{
					{Type: "object", Description: "A JSON-RPC 2.0 response."},
					{Type: "array", Description: "The responses to a JSON-RPC batch, in no particular order.", Items: &huma.Schema{Type: "object"}},
				}}},
				"text/event-stream": stream["text/event-stream"]}},
			"202": {Description: "A notification or response was accepted"},
			"400": answer("A JSON-RPC error: the body is not JSON (-32700) or no JSON-RPC message (-32600), an unsupported protocol version; or the envelope for an agent id or language the API refuses", true),
			"406": notAcceptable,
			"413": answer("A JSON-RPC error: the body exceeds 8 MiB", false),
			"415": answer("A JSON-RPC error: the body is not application/json", false),
		})}, h)
	s.HandleRawOp(huma.Operation{Method: http.MethodGet, Path: Path, OperationID: "mcpEventStream", Tags: tags,
		Summary:     "MCP event stream of a session",
		Description: "For initialize-based clients: the notifications of the session named by Mcp-Session-Id (405 without one).",
		Parameters:  append(params, session),
		Responses: responses(map[string]*huma.Response{
			"200": {Description: "The session's notifications", Content: stream},
			"405": {Description: "No Mcp-Session-Id: a stateless client has no stream to open (a JSON-RPC error)", Headers: allow, Content: answer("", false).Content},
			"406": answer("A JSON-RPC error: the Accept header does not cover text/event-stream", false),
		})}, h)
	s.HandleRawOp(huma.Operation{Method: http.MethodDelete, Path: Path, OperationID: "mcpEndSession", Tags: tags,
		Summary:    "End an MCP session",
		Parameters: append(params, session),
		Responses: responses(map[string]*huma.Response{
			"204": {Description: "The session is closed"},
			"405": {Description: "No Mcp-Session-Id (a JSON-RPC error)", Headers: allow, Content: answer("", false).Content},
			"415": answer("A JSON-RPC error: a body that is not application/json", false),
		})}, h)
	return h
}

// ServeHTTP authorizes the agent in the path and serves MCP for it. Every error it or the
// SDK gives is a JSON-RPC error object, except the API's own (authentication, agent id,
// language), which keep the API's envelope.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	lang := r.URL.Query().Get("language")
	switch lang {
	case "":
		lang = h.tools.DefaultLanguage()
	case "zh", "en":
	default:
		writeError(w, httpapi.BadRequest("language %q is not supported; accepted: zh, en", lang))
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !h.originAllowed(o, r) {
		// The streamable HTTP transport: an invalid Origin is answered 403, with a JSON-RPC
		// error that has no id.
		writeRPCError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("origin %q is not allowed: only the origins in mate.http.cors-origins may call MCP from a browser", o))
		return
	}
	b := binding{agentID: id, language: lang}
	sessionID := r.Header.Get("Mcp-Session-Id")
	stateful := sessionID != ""
	stream := r.Method == http.MethodGet && stateful // a session's event stream
	var reqID jsonrpc.ID
	notification := false
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
				return
			}
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeParseError, "read request body: "+err.Error())
			return
		}
		if !json.Valid(body) {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeParseError, "parse error: the body is not valid JSON")
			return
		}
		msgs, _ := peek(body) // JSON that is no JSON-RPC message: the SDK says what is wrong
		for _, m := range msgs {
			switch m.Method {
			case "initialize":
				// The initialize handshake is the session-based protocol: give it a session.
				stateful = true
			case "subscriptions/listen":
				stream = true
			}
		}
		if len(msgs) == 1 {
			reqID = msgs[0].id()
			notification = !reqID.IsValid() && msgs[0].Method != ""
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	keyID := httpapi.PrincipalFrom(r.Context()).KeyID
	if sessionID != "" && !h.ownedBy(sessionID, b, keyID) {
		writeRPCError(w, http.StatusNotFound, reqID, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	if stream {
		// An event stream lasts as long as the client listens: mate.http.write-timeout-seconds
		// bounds answers, not streams.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	ctx := context.WithValue(r.Context(), bindingKey{}, b)
	jw := &jsonErrors{ResponseWriter: w, id: reqID, notification: notification}
	if stateful {
		jw.onHeader = func() {
			if id := w.Header().Get("Mcp-Session-Id"); id != "" && sessionID == "" {
				h.own(id, b, keyID)
			}
		}
		h.sessions.ServeHTTP(jw, r.WithContext(ctx))
	} else {
		h.sdk.ServeHTTP(jw, r.WithContext(ctx))
	}
	jw.finish()
}

// own records who created a session, and forgets sessions idle for longer than the SDK keeps
// them.
func (h *Handler) own(id string, b binding, keyID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.owners[id] = owner{binding: b, keyID: keyID, seen: now}
	for k, o := range h.owners {
		if now.Sub(o.seen) > SessionIdleTimeout+time.Minute {
			delete(h.owners, k)
		}
	}
}

// ownedBy reports whether session id was created for this binding and key.
func (h *Handler) ownedBy(id string, b binding, keyID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.owners[id]
	if !ok {
		return true // unknown here: the SDK answers 404 session not found
	}
	if o.binding != b || o.keyID != keyID {
		return false
	}
	o.seen = time.Now()
	h.owners[id] = o
	return true
}

// server returns the MCP server for the request's binding (getServer of the SDK handler).
func (h *Handler) server(r *http.Request) *mcp.Server {
	b, ok := r.Context().Value(bindingKey{}).(binding)
	if !ok {
		return nil // not reached through ServeHTTP: the SDK answers 400
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.servers[b]; s != nil {
		return s.Server
	}
	if len(h.servers) >= maxCachedServers {
		for k, s := range h.servers {
			if !s.hasSessions() {
				h.opts.Hub.Remove(s)
				delete(h.servers, k)
			}
		}
	}
	s := New(h.tools, b.agentID, Options{Language: b.language, Transport: HTTP, Notify: true, Log: h.opts.Log, Guard: h.opts.Guard})
	h.servers[b] = s
	h.opts.Hub.Add(s)
	return s.Server
}

// originAllowed: a configured CORS origin, or, without API keys, the server's own loopback
// origin.
func (h *Handler) originAllowed(origin string, r *http.Request) bool {
	if h.cors[strings.ToLower(strings.TrimRight(origin, "/"))] {
		return true
	}
	if h.opts.KeysEnabled {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return false
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
}

// JSON-RPC 2.0 error codes the jsonrpc package does not name.
const codeParseError = -32700

// rpcMessage is what the handler reads of a JSON-RPC message before the SDK does.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
}

func (m rpcMessage) id() jsonrpc.ID {
	var v any
	if len(m.ID) == 0 || json.Unmarshal(m.ID, &v) != nil {
		return jsonrpc.ID{}
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return jsonrpc.ID{}
	}
	return id
}

// peek parses a POST body as one JSON-RPC message or a batch of them.
func peek(body []byte) ([]rpcMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var batch []rpcMessage
		if err := json.Unmarshal(body, &batch); err != nil {
			return nil, err
		}
		return batch, nil
	}
	var m rpcMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	return []rpcMessage{m}, nil
}

// jsonErrors turns the SDK's plain-text HTTP error answers (bad Content-Type or Accept, a
// method without a stream, an invalid message) into JSON-RPC error objects, keeping their
// status.
type jsonErrors struct {
	http.ResponseWriter
	id           jsonrpc.ID // the request's, when the body is one call
	notification bool       // the body is one notification
	onHeader     func()     // called once before the status is written
	capture      bool
	status       int
	buf          bytes.Buffer
}

func (w *jsonErrors) WriteHeader(code int) {
	if w.onHeader != nil {
		w.onHeader()
		w.onHeader = nil
	}
	if code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.capture, w.status = true, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *jsonErrors) Write(b []byte) (int, error) {
	if w.onHeader != nil {
		w.onHeader()
		w.onHeader = nil
	}
	if w.capture {
		return w.buf.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *jsonErrors) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.capture {
		f.Flush()
	}
}

func (w *jsonErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *jsonErrors) finish() {
	if !w.capture {
		return
	}
	w.Header().Del("X-Content-Type-Options")
	msg := strings.TrimSpace(w.buf.String())
	code, status := int64(jsonrpc.CodeInvalidRequest), w.status
	switch {
	case strings.HasPrefix(msg, "JSON RPC not handled") && status == http.StatusBadRequest:
		// The SDK's words for a method it does not serve, refused before the protocol
		// layer sees it (the 2026-07-28 protocol gets SEP-2575's 404 from the SDK itself).
		// The protocols of 2025 answer an unknown method as any other JSON-RPC error, in a
		// 200 response, as the TypeScript and Python SDKs' servers do: a client then reads
		// it as the method's error (the TypeScript SDK's McpError) and not as a transport
		// failure. A notification of a method nobody handles is accepted and dropped.
		code = jsonrpc.CodeMethodNotFound
		switch {
		case w.id.IsValid():
			status = http.StatusOK
		case w.notification:
			w.Header().Del("Content-Type")
			w.ResponseWriter.WriteHeader(http.StatusAccepted)
			return
		}
	case strings.HasPrefix(msg, "Accept must contain"):
		// RFC 9110 §15.5.7 and the TypeScript and Python SDKs' servers: a client that
		// cannot take both answer types is told so with 406 (the Go SDK says 400).
		status = http.StatusNotAcceptable
	}
	writeRPCError(w.ResponseWriter, status, w.id, code, msg)
}

// RPCErrorResponse is a JSON-RPC 2.0 error response: the body of every refusal of the MCP
// endpoint that is not the API's own (authentication, the agent id, the language). The
// OpenAPI document describes these answers with this type.
type RPCErrorResponse struct {
	JSONRPC string   `json:"jsonrpc" enum:"2.0"`
	ID      RPCID    `json:"id" doc:"The request's id; null when the body held no single request whose id could be read."`
	Error   RPCError `json:"error"`
}

// RPCError is the error object of a JSON-RPC error response.
type RPCError struct {
	Code    int64  `json:"code" example:"-32601" doc:"-32700 parse error, -32600 invalid request (the transport's refusals too), -32601 method not found, -32602 invalid params."`
	Message string `json:"message" doc:"What was wrong."`
}

// RPCID is a JSON-RPC request id: a string, an integer, or null.
type RPCID struct{ jsonrpc.ID }

// MarshalJSON writes the id, or null when it is not set.
func (id RPCID) MarshalJSON() ([]byte, error) {
	if !id.IsValid() {
		return []byte("null"), nil
	}
	return json.Marshal(id.Raw())
}

// Schema documents the id (huma.SchemaProvider).
func (RPCID) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{OneOf: []*huma.Schema{{Type: "string"}, {Type: "integer"}, {Type: "null"}}}
}

// writeRPCError answers a JSON-RPC error object with an HTTP status.
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(RPCErrorResponse{JSONRPC: "2.0", ID: RPCID{id}, Error: RPCError{Code: code, Message: msg}})
}

// WriteProtocolError answers the API's own transport refusals of an MCP request (a foreign
// Origin or Host, a body that is not JSON) as JSON-RPC errors without id, as the streamable
// HTTP transport has them (httpapi.ProtocolErrors).
func (h *Handler) WriteProtocolError(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	writeRPCError(w, status, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, msg)
}

// writeError answers with the API's error envelope.
func writeError(w http.ResponseWriter, err error) {
	status, msg := httpapi.Classify(err)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "msg": msg})
}
