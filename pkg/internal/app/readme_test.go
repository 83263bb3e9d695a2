package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/poll"
)

// curlCall is one curl command of a document: its method, path and body.
type curlCall struct {
	method, path, body string
}

var (
	curlURL  = regexp.MustCompile(`localhost:8080(/\S+)`)
	curlBody = regexp.MustCompile(`-d '([^']*)'`)
)

// readmeCurls are the curl commands of the README's "Try it" block (continued lines joined).
func readmeCurls(t *testing.T) []curlCall {
	t.Helper()
	raw, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "Try it:\n\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no \"Try it:\" sh block")
	}
	block = strings.ReplaceAll(block, "\\\n", " ")
	var out []curlCall
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "curl ") {
			continue
		}
		u := curlURL.FindStringSubmatch(line)
		if u == nil {
			t.Fatalf("README curl without a localhost:8080 URL: %s", line)
		}
		c := curlCall{method: http.MethodGet, path: u[1]}
		if strings.Contains(line, "-XPOST") {
			c.method = http.MethodPost
		}
		if b := curlBody.FindStringSubmatch(line); b != nil {
			c.body = b[1]
		}
		out = append(out, c)
	}
	return out
}

// Issue 30: the README's examples run against a fresh service and do what the text
// promises: the note written is listed, and the search finds it (with "Go" too).
func TestReadmeExamples(t *testing.T) {
	calls := readmeCurls(t)
	if len(calls) < 4 {
		t.Fatalf("%d curl examples in the README; 4 expected", len(calls))
	}
	a := apptest.Start(t, "")
	do := func(c curlCall) []byte {
		t.Helper()
		req, err := http.NewRequest(c.method, "http://"+a.Addr+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.method, c.path, res.StatusCode, body)
		}
		return body
	}
	var search curlCall
	for _, c := range calls {
		body := do(c)
		switch {
		case strings.HasSuffix(c.path, "/list_workspace_memory_files"):
			if !strings.Contains(string(body), "memory/2026-04-01.md") {
				t.Errorf("the README's list does not show the note written: %s", body)
			}
		case strings.HasSuffix(c.path, "/memory/search"):
			search = c
		}
	}
	if search.path == "" {
		t.Fatal("the README has no search example")
	}
	// The indexer runs behind the write (an index message): poll until the note is found.
	var last []byte
	found := func(body string) bool {
		var res struct {
			Data struct {
				Hits []struct {
					Filename string `json:"filename"`
				} `json:"hits"`
			} `json:"data"`
		}
		b := do(curlCall{method: http.MethodPost, path: search.path, body: body})
		last = b
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		return len(res.Data.Hits) > 0 && res.Data.Hits[0].Filename == "memory/2026-04-01.md"
	}
	for _, q := range []string{search.body, `{"query":"Go"}`} {
		poll.Until(t, 15*time.Second, "search "+q+" finds memory/2026-04-01.md first", func() bool {
			if found(q) {
				return true
			}
			t.Logf("%s", last) // shown if it never does
			return false
		})
	}
}
