// Package apitest holds tests to the OpenAPI document: a validating http.RoundTripper
// checks every response a test receives against the operation the document lists for it,
// so an undocumented status, header shape or field fails the test that met it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// Validator is an http.RoundTripper that validates responses against the server's
// document (kin-openapi). Errors are reported on t.
type Validator struct {
	t      testing.TB
	next   http.RoundTripper
	doc    *openapi3.T
	routes []route

	mu   sync.Mutex
	seen map[string]bool
}

type route struct {
	path   string
	re     *regexp.Regexp
	names  []string
	weight int
}

// registerJSONLines teaches kin-openapi (whose decoders are process-wide) the agent bundle's
// media type: JSON Lines, documented as a string; every line must be a JSON object.
var registerJSONLines = sync.OnceFunc(func() {
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			var obj map[string]any
			if len(b) > 0 && json.Unmarshal(line, &obj) != nil {
				return nil, fmt.Errorf("JSON Lines: line %d is not a JSON object", i+1)
			}
		}
		return string(b), nil
	})
})

// New builds a validator for s's document, sending requests with next
// (http.DefaultTransport when nil).
func New(t testing.TB, s *httpapi.Server, next http.RoundTripper) *Validator {
	t.Helper()
	registerJSONLines()
	raw, err := s.API().OpenAPI().MarshalJSON()
	if err != nil {
		t.Fatalf("marshal the OpenAPI document: %v", err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	v := &Validator{t: t, next: next, doc: doc, seen: map[string]bool{}}
	for path := range doc.Paths.Map() {
		v.routes = append(v.routes, compile(path))
	}
	// The most literal template wins: …/{filename}/history before …/{filename}.
	sort.Slice(v.routes, func(i, j int) bool { return v.routes[i].weight > v.routes[j].weight })
	return v
}

// Client is an http.Client whose responses are validated; it does not follow redirects.
func (v *Validator) Client() *http.Client {
	return &http.Client{Transport: v, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var param = regexp.MustCompile(`\{([^}]+)\}`)

// compile turns a path template into a pattern; {filename} takes the rest of the path, as
// the server mounts it.
func compile(path string) route {
	r := route{path: path}
	expr := "^"
	rest := path
	for {
		loc := param.FindStringIndex(rest)
		if loc == nil {
			expr += regexp.QuoteMeta(rest)
			r.weight += len(rest)
			break
		}
		expr += regexp.QuoteMeta(rest[:loc[0]])
		r.weight += loc[0]
		name := rest[loc[0]+1 : loc[1]-1]
		r.names = append(r.names, name)
		if name == "filename" {
			expr += "(.+)"
		} else {
			expr += "([^/]+)"
		}
		rest = rest[loc[1]:]
	}
	r.re = regexp.MustCompile(expr + "$")
	return r
}

// Wrap validates the responses of h (the server side of the same check, for tests that
// serve s with httptest.NewServer and call it with any client). Streams are not supported:
// each response is recorded whole before it is sent on.
func (v *Validator) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := readBody(r)
		if err != nil {
			v.t.Errorf("read the request body: %v", err)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		resp := rec.Result()
		body := rec.Body.Bytes()
		if msg := v.check(r, reqBody, resp, body); msg != "" {
			v.t.Errorf("%s %s answered %d against the OpenAPI document: %s\nbody: %.600s", r.Method, r.URL.Path, resp.StatusCode, msg, body)
		}
		for k, vals := range rec.Header() {
			w.Header()[k] = vals
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// Serve starts s behind a validator on a test server, closed when the test ends.
func Serve(t testing.TB, s *httpapi.Server) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(t, s, nil).Wrap(s))
	t.Cleanup(srv.Close)
	return srv
}

// RoundTrip sends req and validates the response.
func (v *Validator) RoundTrip(req *http.Request) (*http.Response, error) {
	reqBody, err := readBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if msg := v.check(req, reqBody, resp, body); msg != "" {
		v.t.Errorf("%s %s answered %d against the OpenAPI document: %s\nbody: %.600s", req.Method, req.URL.Path, resp.StatusCode, msg, body)
	}
	return resp, nil
}

// readBody reads r's body and puts it back, for the request's validation.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

// check returns what is wrong with the exchange, or "": the response must be one the
// operation documents; a request the server accepted (2xx) must be one the document allows,
// or a client generated from it could not send it.
func (v *Validator) check(req *http.Request, reqBody []byte, resp *http.Response, body []byte) string {
	var (
		rt     *route
		values []string
	)
	for i := range v.routes {
		// Match segments as the server does, escaped (conv%2F1 is one segment).
		if m := v.routes[i].re.FindStringSubmatch(req.URL.EscapedPath()); m != nil {
			rt, values = &v.routes[i], m[1:]
			break
		}
	}
	if rt == nil {
		// The server's answer to a path it has no route for (404 "no route", or 400 for
		// a path that is not canonical) is not an operation's.
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest {
			return ""
		}
		return "no documented path matches"
	}
	item := v.doc.Paths.Value(rt.path)
	op := item.GetOperation(req.Method)
	if op == nil {
		// ServeMux answers a method no route takes (405, Allow), and a rest route's
		// method without its suffix (POST on a file) answers 405 too: neither is listed.
		if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
			return ""
		}
		return fmt.Sprintf("%s is not documented on %s", req.Method, rt.path)
	}
	v.mu.Lock()
	v.seen[op.OperationID] = true
	v.mu.Unlock()
	params := map[string]string{}
	for i, n := range rt.names {
		params[n] = values[i]
		if u, err := url.PathUnescape(values[i]); err == nil {
			params[n] = u
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params,
			Route: &routers.Route{Spec: v.doc, Path: rt.path, PathItem: item, Method: req.Method, Operation: op}},
		Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err.Error()
	}
	// kin-openapi accepts any body for a response the document gives no content: a body
	// there is undocumented (a 405 said to have none that carries an error object).
	if r := op.Responses.Status(resp.StatusCode); r != nil && r.Value != nil && len(r.Value.Content) == 0 && len(bytes.TrimSpace(body)) > 0 {
		return fmt.Sprintf("a %d answer has a body (%s) where the document gives it none", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp.StatusCode >= 300 {
		return ""
	}
	if err := validateRequest(in.RequestValidationInput, req, reqBody); err != nil {
		return "the server accepted a request the document refuses: " + err.Error()
	}
	return ""
}

func validateRequest(in *openapi3filter.RequestValidationInput, req *http.Request, body []byte) error {
	rin := *in
	r2 := req.Clone(context.Background())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	rin.Request = r2
	rin.Options = &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	return openapi3filter.ValidateRequest(context.Background(), &rin)
}

// RequestError is the document's verdict on a request: nil when the operation the document
// lists for it accepts its parameters and body, else what the document refuses. A test holds
// the server's refusals to it: a body the server refuses as malformed must be one the
// document refuses too, or the document promises what the server does not take.
func (v *Validator) RequestError(req *http.Request, body []byte) error {
	for i := range v.routes {
		m := v.routes[i].re.FindStringSubmatch(req.URL.EscapedPath())
		if m == nil {
			continue
		}
		rt := &v.routes[i]
		item := v.doc.Paths.Value(rt.path)
		op := item.GetOperation(req.Method)
		if op == nil {
			return fmt.Errorf("%s is not documented on %s", req.Method, rt.path)
		}
		params := map[string]string{}
		for j, n := range rt.names {
			params[n] = m[j+1]
			if u, err := url.PathUnescape(m[j+1]); err == nil {
				params[n] = u
			}
		}
		return validateRequest(&openapi3filter.RequestValidationInput{Request: req, PathParams: params,
			Route: &routers.Route{Spec: v.doc, Path: rt.path, PathItem: item, Method: req.Method, Operation: op}}, req, body)
	}
	return fmt.Errorf("no documented path matches %s", req.URL.Path)
}

// Seen lists the operations whose responses were validated, sorted.
func (v *Validator) Seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.seen))
	for id := range v.seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Operations lists the document's operation ids with the given tag prefix ("" for all),
// sorted: compare with Seen to find operations no test exercised.
func (v *Validator) Operations(tag string) []string {
	var out []string
	for _, item := range v.doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, tg := range op.Tags {
				if strings.HasPrefix(tg, tag) {
					out = append(out, op.OperationID)
					break
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
