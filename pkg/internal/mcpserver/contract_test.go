package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
)

// TestHTTPAnswersMatchTheDocument sends the MCP endpoint what real clients send at its edges
// (an unknown method or session, the wrong Accept or Content-Type, a foreign Origin or Host,
// no session for GET and DELETE) and holds each answer to what the streamable HTTP transport
// and the reference servers answer, and to the served OpenAPI document (apitest's validating
// client fails the test on an undocumented status, body or shape).
func TestHTTPAnswersMatchTheDocument(t *testing.T) {
	const (
		list   = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
		both   = "application/json, text/event-stream"
		origin = "https://evil.example"
	)
	type req struct {
		method, body string
		header       map[string]string
		host         string
	}
	type want struct {
		status int
		kind   string // "rpc" (a JSON-RPC error), "envelope", "result" or "" (no body)
		code   int64  // the JSON-RPC error code
		id     any
	}
	cases := []struct {
		name string
		keys string
		req  req
		want want
	}{
		{"unknown method", "k1=1", req{"POST", `{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`, nil, ""}, want{200, "rpc", -32601, 7.0}},
		{"unknown notification", "k1=1", req{"POST", `{"jsonrpc":"2.0","method":"notifications/foo"}`, nil, ""}, want{202, "", 0, nil}},
		{"unknown session", "k1=1", req{"POST", list, map[string]string{"Mcp-Session-Id": "nope"}, ""}, want{404, "rpc", -32600, 3.0}},
		{"no Accept", "k1=1", req{"POST", list, map[string]string{"Accept": ""}, ""}, want{406, "rpc", -32600, 3.0}},
		{"Accept JSON only", "k1=1", req{"POST", list, map[string]string{"Accept": "application/json"}, ""}, want{406, "rpc", -32600, 3.0}},
		{"Accept */*", "k1=1", req{"POST", list, map[string]string{"Accept": "*/*"}, ""}, want{200, "result", 0, 3.0}},
		{"text/plain body", "k1=1", req{"POST", list, map[string]string{"Content-Type": "text/plain"}, ""}, want{415, "rpc", -32600, nil}},
		{"foreign Origin with keys", "k1=1", req{"POST", list, map[string]string{"Origin": origin}, ""}, want{403, "rpc", -32600, nil}},
		{"foreign Origin without keys", "", req{"POST", list, map[string]string{"Origin": origin}, ""}, want{403, "rpc", -32600, nil}},
		{"foreign Host without keys", "", req{"POST", list, nil, "evil.example"}, want{403, "rpc", -32600, nil}},
		{"GET without session", "k1=1", req{"GET", "", map[string]string{"Accept": "text/event-stream"}, ""}, want{405, "rpc", -32600, nil}},
		{"DELETE without session", "k1=1", req{"DELETE", "", nil, ""}, want{405, "rpc", -32600, nil}},
		{"no key", "k1=1", req{"POST", list, map[string]string{"Authorization": ""}, ""}, want{401, "envelope", 0, nil}},
		{"agent id not a number", "k1=1", req{"POST", list, nil, "path:/api/v1/agents/abc/mcp"}, want{400, "envelope", 0, nil}},
		{"language not served", "k1=1", req{"POST", list, nil, "path:/api/v1/agents/1/mcp?language=fr"}, want{400, "envelope", 0, nil}},
	}
	apps := map[string]*struct {
		base   string
		client *http.Client
	}{}
	for _, keys := range []string{"k1=1", ""} {
		a := apptest.Start(t, keys)
		apps[keys] = &struct {
			base   string
			client *http.Client
		}{"http://" + a.Addr, apitest.New(t, a.HTTP, nil).Client()}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := apps[c.keys]
			path := "/api/v1/agents/1/mcp"
			host := c.req.host
			if p, ok := strings.CutPrefix(host, "path:"); ok {
				path, host = p, ""
			}
			r, err := http.NewRequest(c.req.method, a.base+path, strings.NewReader(c.req.body))
			if err != nil {
				t.Fatal(err)
			}
			if host != "" {
				r.Host = host
			}
			hdr := map[string]string{"Accept": both}
			if c.req.body != "" {
				hdr["Content-Type"] = "application/json"
			}
			if c.keys != "" {
				hdr["Authorization"] = "Bearer k1"
			}
			for k, v := range c.req.header {
				hdr[k] = v
			}
			for k, v := range hdr {
				if v != "" {
					r.Header.Set(k, v)
				}
			}
			resp, err := a.client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			var got struct {
				JSONRPC string `json:"jsonrpc"`
				ID      any    `json:"id"`
				Result  any    `json:"result"`
				Error   *struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			if len(body) > 0 {
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("%d, body is not JSON: %q", resp.StatusCode, body)
				}
			}
			var ok bool
			switch c.want.kind {
			case "rpc":
				ok = got.JSONRPC == "2.0" && got.Error != nil && got.Error.Code == c.want.code && got.Error.Message != "" && got.ID == c.want.id
			case "result":
				ok = got.JSONRPC == "2.0" && got.Result != nil && got.ID == c.want.id
			case "envelope":
				ok = got.Code == c.want.status && got.Msg != "" && got.JSONRPC == ""
			case "":
				ok = len(strings.TrimSpace(string(body))) == 0
			}
			if resp.StatusCode != c.want.status || !ok {
				t.Fatalf("answered %d %.300s; want %d with a %q body (code %d, id %v)", resp.StatusCode, body, c.want.status, c.want.kind, c.want.code, c.want.id)
			}
			if resp.StatusCode == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("405 without Allow: POST: %v", resp.Header)
			}
		})
	}
}
