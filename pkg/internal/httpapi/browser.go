package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// WithCORS allows browser pages from these origins ("https://app.example.com") to call the
// API: they get Access-Control-Allow-* headers and preflights are answered. Other origins get
// no CORS headers (so a browser does not let them read answers), and in no-key mode they are
// refused outright.
func WithCORS(origins []string) Option {
	return func(s *Server) {
		s.cors = map[string]bool{}
		for _, o := range origins {
			if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
				s.cors[strings.ToLower(o)] = true
			}
		}
	}
}

// browserCheck protects the API from pages in the user's browser. It returns a non-nil error
// for a request that must be refused:
//   - with no API keys (the loopback development mode) a Host that is not loopback (DNS
//     rebinding: a page on evil.example resolving to 127.0.0.1 could read the answers) and an
//     Origin other than the server's own or a configured CORS origin (a page posting to
//     127.0.0.1 without preflight) are refused;
//   - with or without keys, a body sent to an API route must be application/json: an HTML form
//     or a text/plain "simple" request, which browsers send cross-origin without preflight,
//     is refused.
func (s *Server) browserCheck(r *http.Request) error {
	open := !s.auth.Enabled()
	if open && !LoopbackHost(r.Host) {
		return Errorf(http.StatusForbidden, "Host %q is not allowed: without API keys the server answers only requests addressed to localhost or a loopback address (set mate.auth.keys to serve other names)", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" && open && !s.sameOrigin(o, r) && !s.cors[strings.ToLower(o)] {
		return Errorf(http.StatusForbidden, "cross-origin request from %q refused: without API keys only the server's own pages and the origins in mate.http.cors-origins may call it", o)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && hasBody(r) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if !jsonMedia(r.Header.Get("Content-Type")) {
				ct := r.Header.Get("Content-Type")
				if ct == "" {
					ct = "none"
				}
				return Errorf(http.StatusUnsupportedMediaType, "request body must be JSON: send Content-Type: application/json (got %s)", ct)
			}
		}
	}
	return nil
}

// corsHeaders adds the CORS headers for an allowed origin and answers its preflight. It reports
// whether the request was a preflight (and is answered).
func (s *Server) corsHeaders(w http.ResponseWriter, r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || !s.cors[strings.ToLower(o)] {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", o)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "ETag, Location, Retry-After, X-Request-Id")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, If-None-Match, X-Request-Id, X-Tool-Call-Id, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, traceparent, tracestate")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

func (s *Server) sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) && LoopbackHost(u.Host)
}

func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
}

func jsonMedia(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	// JSON Lines (an agent bundle, POST …/import) is no CORS-safelisted type either: a
	// browser preflights it, as it does application/json.
	return mt == "application/json" || mt == "application/x-ndjson" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// LoopbackHost reports whether a Host header (host or host:port) names this machine's
// loopback interface (the console's browser check uses it too).
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
