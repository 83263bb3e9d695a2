package console

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

func TestEveryKeyHasBothLanguages(t *testing.T) {
	for k := range en {
		if _, ok := zh[k]; !ok {
			t.Errorf("%q has no Chinese text", k)
		}
	}
	for k := range zh {
		if _, ok := en[k]; !ok {
			t.Errorf("%q has no English text", k)
		}
	}
}

func TestSessionCookieIsTamperProofAndExpires(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ss := newSessions(sessionSecret([]string{"key-one-0123456789abcdef"}), func() time.Time { return now })
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/console/", nil)
	if err := ss.write(rec, r, session{ID: "abc", Key: "key-one-0123456789abcdef", Issued: now.Unix()}); err != nil {
		t.Fatal(err)
	}
	c := rec.Result().Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || strings.Contains(c.Value, "key-one") {
		t.Fatalf("cookie attributes or plain key: %+v", c)
	}
	read := func(v string) bool {
		r := httptest.NewRequest(http.MethodGet, "/console/", nil)
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: v})
		_, ok := ss.read(r)
		return ok
	}
	if !read(c.Value) {
		t.Fatal("a fresh session is not accepted")
	}
	b := []byte(c.Value)
	b[len(b)/2] ^= 1
	if read(string(b)) {
		t.Fatal("a tampered cookie was accepted")
	}
	// Another replica with the same keys reads it; one with other keys does not.
	other := newSessions(sessionSecret([]string{"key-one-0123456789abcdef"}), func() time.Time { return now })
	r2 := httptest.NewRequest(http.MethodGet, "/console/", nil)
	r2.AddCookie(c)
	if _, ok := other.read(r2); !ok {
		t.Fatal("a replica with the same keys cannot read the session")
	}
	if _, ok := newSessions(sessionSecret([]string{"key-two-0123456789abcdef"}), time.Now).read(r2); ok {
		t.Fatal("a replica with other keys read the session")
	}
	now = now.Add(sessionTTL + time.Minute)
	if read(c.Value) {
		t.Fatal("an expired session was accepted")
	}
	if ss.validToken(session{ID: "abc"}, ss.token(session{ID: "abd"})) || !ss.validToken(session{ID: "abc"}, ss.token(session{ID: "abc"})) {
		t.Fatal("CSRF tokens are not bound to their session")
	}
}

func newTestConsole(t *testing.T, keys []config.APIKey) *Console {
	t.Helper()
	c, _ := newTestConsoleLedger(t, keys)
	return c
}

func newTestConsoleLedger(t *testing.T, keys []config.APIKey) (*Console, *ledger.Ledger) {
	t.Helper()
	db, err := store.Open("sqlite", "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, k := range keys {
		secrets = append(secrets, k.Key)
	}
	l := ledger.New(db, nil)
	c, err := New(Deps{Auth: httpapi.NewAuthenticator(keys), Keys: secrets, Workspace: workspace.New(db), Ledger: l, Language: "zh-CN"})
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}

// Without keys (loopback mode) the console refuses other Host names and foreign origins,
// and still wants its CSRF token.
func TestNoKeyModeRefusesCrossOrigin(t *testing.T) {
	c := newTestConsole(t, nil)
	cases := []struct {
		name, method, host, origin string
		want                       int
	}{
		{"loopback page", http.MethodGet, "127.0.0.1:8080", "", http.StatusOK},
		{"localhost page", http.MethodGet, "localhost:8080", "", http.StatusOK},
		{"rebound host", http.MethodGet, "evil.example:8080", "", http.StatusForbidden},
		{"foreign origin read", http.MethodGet, "127.0.0.1:8080", "http://evil.example", http.StatusForbidden},
		{"foreign origin write", http.MethodPost, "127.0.0.1:8080", "http://evil.example", http.StatusForbidden},
		{"same origin write without token", http.MethodPost, "127.0.0.1:8080", "http://127.0.0.1:8080", http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			path := "/console/"
			if tc.method == http.MethodPost {
				path = "/console/agents/1/file"
				body = strings.NewReader(url.Values{"name": {"MEMORY.md"}, "version": {"0"}, "content": {"x"}}.Encode())
			} else {
				body = strings.NewReader("")
			}
			r := httptest.NewRequest(tc.method, path, body)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.method == http.MethodPost {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			w := httptest.NewRecorder()
			c.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("%s %s Host %s Origin %q: %d, want %d: %.300s", tc.method, path, tc.host, tc.origin, w.Code, tc.want, w.Body.String())
			}
		})
	}
}

// With keys, an unsigned visitor is sent to sign in and the language follows mate.language.
func TestSignInRequired(t *testing.T) {
	c := newTestConsole(t, []config.APIKey{{Key: "console-test-key-0123456789", Agents: []string{"1"}}})
	r := httptest.NewRequest(http.MethodGet, "/console/agents/1", nil)
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/console/signin?next=") {
		t.Fatalf("unsigned: %d %s", w.Code, w.Header().Get("Location"))
	}
	w = httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/console/signin", nil))
	if !strings.Contains(w.Body.String(), "登录") || !strings.Contains(w.Body.String(), `lang="zh-CN"`) {
		t.Fatalf("sign-in page not in mate.language: %.400s", w.Body.String())
	}
	// An open redirect through next= is refused.
	if got := safeNext("//evil.example/x"); got != "/console/" {
		t.Fatalf("safeNext: %q", got)
	}
}

func TestSideBySidePairsChangedLines(t *testing.T) {
	rows, changed := sideBySide("a\nb\nc\n", "a\nB\nc\nd\n")
	if !changed || len(rows) != 4 || rows[1].Kind != "mod" || rows[1].Left != "b" || rows[1].Right != "B" || rows[3].Kind != "add" || rows[3].Right != "d" {
		t.Fatalf("rows: %+v", rows)
	}
	if _, changed := sideBySide("same\n", "same\n"); changed {
		t.Fatal("equal texts reported as changed")
	}
}

func TestCronPreview(t *testing.T) {
	c := newTestConsole(t, nil)
	get := func(q string) string {
		r := httptest.NewRequest(http.MethodGet, "/console/cron/preview?"+q, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		return w.Body.String()
	}
	if s := get(url.Values{"cronExpression": {"0 8 * * 1-5"}, "timezone": {"Asia/Shanghai"}}.Encode()); !strings.Contains(s, "c-preview-next") || !strings.Contains(s, "08:00 CST") {
		t.Fatalf("valid expression: %s", s)
	}
	if s := get(url.Values{"cronExpression": {"61 * * * *"}}.Encode()); !strings.Contains(s, "c-preview-error") {
		t.Fatalf("invalid expression: %s", s)
	}
}

// The ledger pages page on: 250 runs are listed 100, 100 and 50 at a time, none twice.
func TestRunsPaging(t *testing.T) {
	c, l := newTestConsoleLedger(t, nil)
	for i := 0; i < 250; i++ {
		if _, err := l.Record(t.Context(), ledger.Run{Kind: ledger.KindSummarize, AgentID: 1, Status: "completed", EventID: fmt.Sprintf("evt-%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, w.Code)
		}
		return w.Body.String()
	}
	seen := map[string]bool{}
	count := func(page string) int {
		n := 0
		for _, part := range strings.Split(page, `<td class="mono">`)[1:] {
			id, _, _ := strings.Cut(part, "<")
			if seen[id] {
				t.Fatalf("%s listed twice", id)
			}
			seen[id] = true
			n++
		}
		return n
	}
	page := get("/console/agents/1/runs?status=completed")
	for _, want := range []int{100, 100, 50} {
		n := count(page)
		older := strings.Contains(page, `id="older"`)
		if n != want || older != (want == 100) {
			t.Fatalf("a page of %d runs (want %d), older link %v", n, want, older)
		}
		if !older {
			break
		}
		i := strings.LastIndex(page, `" id="older"`)
		j := strings.LastIndex(page[:i], `"`)
		next := html.UnescapeString(page[j+1 : i])
		if !strings.Contains(next, "status=completed") {
			t.Fatalf("the next page lost the filter: %s", next)
		}
		page = get(next)
	}
	if len(seen) != 250 {
		t.Fatalf("%d runs listed, want 250", len(seen))
	}
}

// Without JavaScript a manual button's answer is the runs page with the outcome, not a
// bare fragment.
func TestManualOutcomeWithoutJavaScript(t *testing.T) {
	c := newTestConsole(t, nil)
	c.d.Summarize = fakeSummarizer{}
	// A first GET sets the session cookie and gives the token.
	r := httptest.NewRequest(http.MethodGet, "/console/agents/1/runs", nil)
	r.Host = "127.0.0.1"
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	cookie := w.Result().Cookies()[0]
	page := w.Body.String()
	_, rest, _ := strings.Cut(page, `name="csrf" value="`)
	token, _, _ := strings.Cut(rest, `"`)
	post := func(htmx bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/console/agents/1/summarize", strings.NewReader(url.Values{"csrf": {token}, "conversationId": {"c1"}}.Encode()))
		r.Host = "127.0.0.1"
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if htmx {
			r.Header.Set("HX-Request", "true")
		}
		r.AddCookie(cookie)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		return w
	}
	if w := post(false); w.Code != http.StatusSeeOther || !strings.Contains(w.Header().Get("Location"), "flash=skipped") {
		t.Fatalf("without htmx: %d %s", w.Code, w.Header().Get("Location"))
	}
	if w := post(true); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="outcome-text"`) || strings.Contains(w.Body.String(), "<html") {
		t.Fatalf("with htmx: %d %.300s", w.Code, w.Body.String())
	}
}

type fakeSummarizer struct{}

func (fakeSummarizer) Summarize(ctx context.Context, agentID int64, conv string, force bool, wait time.Duration) (summarizer.ManualOutcome, error) {
	var o summarizer.ManualOutcome
	o.Status, o.Reason = "skipped", "already extracted"
	return o, nil
}

// The operations page lists dead letters a page at a time, every one exactly once.
func TestDeadLetterPaging(t *testing.T) {
	_, dial := bustest.Server(t)
	nc, err := dial.Connect("console-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), bus.DLQStreamConfig(1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	const n = dlqPage + 30
	for i := 0; i < n; i++ {
		if _, err := bus.DeadLetter(t.Context(), js, bus.Letter{Subject: fmt.Sprintf("mate.conversation.completed.%d", i),
			Data: []byte(`{"n":` + strconv.Itoa(i) + `}`), Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestConsole(t, nil)
	c.d.JS = js
	get := func(path string) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", path, w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	seen := map[string]bool{}
	page := get("/console/ops")
	for _, want := range []int{dlqPage, n - dlqPage} {
		rows := strings.Split(page, `id="retry-`)[1:]
		for _, r := range rows {
			seq, _, _ := strings.Cut(r, `"`)
			if seen[seq] {
				t.Fatalf("dead letter %s listed twice", seq)
			}
			seen[seq] = true
		}
		next := strings.Contains(page, `id="dlq-next"`)
		if len(rows) != want || next != (want == dlqPage) {
			t.Fatalf("a page of %d dead letters (want %d), next link %v", len(rows), want, next)
		}
		if !next {
			break
		}
		i := strings.Index(page, `/console/ops?dlqAfter=`)
		link, _, _ := strings.Cut(page[i:], `"`)
		link, _, _ = strings.Cut(html.UnescapeString(link), "#") // a browser does not send the fragment
		page = get(link)
	}
	if len(seen) != n {
		t.Fatalf("%d dead letters listed, want %d", len(seen), n)
	}
	r := httptest.NewRequest(http.MethodGet, "/console/ops?dlqAfter=x", nil)
	r.Host = "127.0.0.1"
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "dlqAfter must be") {
		t.Fatalf("bad cursor: %d", w.Code)
	}
}
