package mcpserver

import (
	"net/http"
	"testing"
)

func TestOriginAllowed(t *testing.T) {
	cases := []struct {
		keys   bool
		origin string
		host   string
		want   bool
	}{
		{true, "https://app.example.com", "api.internal:8080", true},  // a configured CORS origin
		{true, "https://APP.example.com/", "api.internal:8080", true}, // compared like httpapi does
		{true, "https://evil.example", "api.internal:8080", false},    // any other
		{true, "http://127.0.0.1:8080", "127.0.0.1:8080", false},      // with keys, not even its own
		{false, "http://127.0.0.1:8080", "127.0.0.1:8080", true},      // no keys: its own loopback origin
		{false, "http://localhost:8080", "localhost:8080", true},      //
		{false, "http://localhost:9999", "localhost:8080", false},     // another port is another origin
		{false, "http://evil.example", "evil.example", false},         // DNS rebinding
		{false, "https://app.example.com", "127.0.0.1:8080", true},    // a configured CORS origin
		{false, "null", "127.0.0.1:8080", false},                      // sandboxed pages
	}
	for _, c := range cases {
		h := NewHandler(nil, HTTPOptions{CORSOrigins: []string{" https://app.example.com/ "}, KeysEnabled: c.keys})
		r, _ := http.NewRequest(http.MethodPost, "http://"+c.host+"/api/v1/agents/1/mcp", nil)
		if got := h.originAllowed(c.origin, r); got != c.want {
			t.Errorf("keys=%v origin %q host %q: allowed=%v, want %v", c.keys, c.origin, c.host, got, c.want)
		}
	}
}
