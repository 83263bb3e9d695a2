package summarizer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

type reply struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

func call(t *testing.T, method, url, key, body string) (int, reply) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: not the envelope: %s", method, url, raw)
	}
	if r.Code != resp.StatusCode {
		t.Fatalf("envelope code %d != HTTP status %d", r.Code, resp.StatusCode)
	}
	return resp.StatusCode, r
}

const validEvent = `{"eventId":"evt-http-1","agentId":1,"conversationId":"c1","userMessage":"hello there, friend","assistantReply":"hi","messageCount":4,"triggerSource":"web"}`

func TestPublishEndpoint(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t))
	srv := h.httpServer(config.APIKey{Key: "k1", Agents: []string{"1"}}, config.APIKey{Key: "ops", Admin: true})
	url := srv.URL + "/api/v1/events/conversation-completed"

	st, r := call(t, "POST", url, "k1", validEvent)
	var ack struct {
		EventID   string `json:"eventId"`
		Stream    string `json:"stream"`
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
	}
	_ = json.Unmarshal(r.Data, &ack)
	if st != 202 || ack.EventID != "evt-http-1" || ack.Stream != "MATE_EVENTS" || ack.Seq != 1 || ack.Duplicate {
		t.Fatalf("first publish: %d %s", st, r.Data)
	}
	st, r = call(t, "POST", url, "k1", validEvent)
	_ = json.Unmarshal(r.Data, &ack)
	if st != 202 || ack.Seq != 1 || !ack.Duplicate {
		t.Fatalf("retried publish: %d %s", st, r.Data)
	}
	st, r = call(t, "POST", url, "k1", strings.Replace(validEvent, `"eventId":"evt-http-1",`, "", 1))
	_ = json.Unmarshal(r.Data, &ack)
	if st != 202 || len(ack.EventID) != 36 || ack.Seq != 2 {
		t.Fatalf("publish without an id: %d %s", st, r.Data)
	}

	bad := []struct{ name, body, msg string }{
		{"agent", strings.Replace(validEvent, `"agentId":1`, `"agentId":0`, 1), "agentId must be a positive number"},
		{"conversation", strings.Replace(validEvent, `"conversationId":"c1"`, `"conversationId":" "`, 1), "conversationId is empty"},
		{"tool calls", strings.Replace(validEvent, `"web"`, `"web","messages":[{"role":"assistant","toolCalls":{"id":"c1"}}]`, 1), `messages[0]: toolCalls must be a JSON array of OpenAI tool calls`},
		{"trigger", strings.Replace(validEvent, `"web"`, `"fax machine"`, 1), `triggerSource "fax machine" may not contain spaces`},
		{"count", strings.Replace(validEvent, `"messageCount":4`, `"messageCount":-1`, 1), "messageCount must be 0 or more"},
		{"role", strings.Replace(validEvent, `"web"`, `"web","messages":[{"role":"robot","content":"x"}]`, 1), `messages[0]: role "robot"`},
		{"unknown field", strings.Replace(validEvent, `"web"`, `"web","agent":1`, 1), "unknown field"},
		{"not json", `{"agentId":`, "invalid JSON"},
		{"empty", ``, "request body is empty"},
	}
	for _, b := range bad {
		st, r := call(t, "POST", url, "k1", b.body)
		if st != 400 || !strings.Contains(r.Msg, b.msg) {
			t.Errorf("%s: %d %q, want 400 with %q", b.name, st, r.Msg, b.msg)
		}
	}
	if st, r := call(t, "POST", url, "k1", strings.Replace(validEvent, `"agentId":1`, `"agentId":2`, 1)); st != 403 {
		t.Fatalf("other agent: %d %s", st, r.Msg)
	}
	if st, _ := call(t, "POST", url, "", validEvent); st != 401 {
		t.Fatalf("no key: %d", st)
	}

	// JetStream gone: 503 with a clear message, never a 2xx.
	h.ns.Shutdown()
	h.ns.WaitForShutdown()
	st, r = call(t, "POST", url, "k1", strings.Replace(validEvent, "evt-http-1", "evt-http-2", 1))
	if st != 503 || !strings.Contains(r.Msg, "the event was not stored: JetStream is unavailable") {
		t.Fatalf("with NATS down: %d %q", st, r.Msg)
	}
}

// manualOutcome is what a manual summarize request came to: the answer (HTTP status and
// message), and the run it settled on.
type manualOutcome struct {
	HTTPStatus int
	Msg        string
	Status     string
	Reason     string
	RunID      string
	// Retried: the answer was a failure to be retried automatically, and Status and Reason
	// are those of the retry the ledger recorded.
	Retried bool
}

// summarizeManually posts a manual summarize request for conv and returns its outcome. The
// endpoint answers the first attempt's outcome, and a transient failure of that attempt (a
// 1 s lease lost on a loaded machine) is a 500 that says it will be retried: then the
// outcome is the request's final run in the ledger, which must come within the wait.
func summarizeManually(t *testing.T, h *harness, url string, agent int64, conv string) manualOutcome {
	t.Helper()
	st, r := call(t, "POST", url, "", "")
	o := manualOutcome{HTTPStatus: st, Msg: r.Msg}
	const failed, retrying = "记忆提取失败: ", "（将自动重试 / will be retried automatically）"
	if st != 500 || !strings.HasSuffix(r.Msg, retrying) {
		var d struct{ Status, Reason, RunID string }
		_ = json.Unmarshal(r.Data, &d)
		o.Status, o.Reason, o.RunID = d.Status, d.Reason, d.RunID
		if st == 500 {
			o.Status, o.Reason = store.RunFailed, strings.TrimPrefix(r.Msg, failed)
		}
		return o
	}
	// The failed attempt's ledger row has the reason the answer quotes; its event id is the
	// request's, under which the retries are recorded.
	reason := strings.TrimSuffix(strings.TrimPrefix(r.Msg, failed), retrying)
	runs, err := h.ledger.List(context.Background(), ledger.Filter{AgentID: agent, Kind: ledger.KindSummarize, Status: store.RunFailed, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	request := ""
	for _, run := range runs {
		if run.Reason == reason && slices.Contains(run.Conversations, conv) {
			request = run.EventID
			break
		}
	}
	if request == "" {
		t.Fatalf("manual summarize of %s answered %d %q, but no failed run of agent %d records it", conv, st, r.Msg, agent)
	}
	t.Logf("manual summarize of %s: the first attempt failed (%s); waiting for its retry", conv, reason)
	o.Retried = true
	poll.Until(t, h.set.ManualTimeout, "the retried manual request's final run", func() bool {
		runs := h.runs(request)
		last := runs[0]
		if last.Status == store.RunFailed && !strings.Contains(last.Reason, "dead-lettered") {
			return false // retried again
		}
		o.Status, o.Reason, o.RunID = string(last.Status), last.Reason, last.RunID
		return true
	})
	return o
}

func TestManualSummarize(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) {
			s.Memory.CooldownMinutes = 5
			s.ManualTimeout = 60 * time.Second // generous: a loaded CI machine can delay a delivery by an AckWait or two
		}))
		srv := h.httpServer()
		h.conversation(1, "c1", "t1-1", 4)
		h.conversation(1, "c2", "t1-2", 4)
		h.conversation(1, "few", "t1-3", 2)
		h.worker(h.service("w1"))
		url := func(conv string) string { return srv.URL + "/api/v1/memory/1/summarize/" + conv }

		// An automatic extraction starts the 5-minute cooldown...
		h.publish(completed(1, "c1", "e-auto", 4))
		poll.Until(t, 20*time.Second, "auto event settled", h.settled)
		// ...which a manual request does not wait for: answered completed, or (its first
		// attempt failing transiently) answered 500 and completed by the retry.
		o := summarizeManually(t, h, url("c2"), 1, "c2")
		if o.Status != store.RunCompleted || o.RunID == "" || !o.Retried && o.HTTPStatus != 200 {
			t.Fatalf("manual summarize: %+v", o)
		}
		// Extracted once, whichever attempt did it.
		notes, _ := h.ws.ListContent(context.Background(), 1, "memory/", 0)
		if len(notes) != 1 || strings.Count(notes[0].Content, "covered t1-2") != 1 {
			t.Fatalf("daily note %+v", notes)
		}
		o = summarizeManually(t, h, url("c2"), 1, "c2")
		if o.Status != store.RunSkipped || !strings.Contains(o.Reason, "already extracted") || !o.Retried && o.HTTPStatus != 200 {
			t.Fatalf("second manual summarize: %+v", o)
		}
		o = summarizeManually(t, h, url("few"), 1, "few")
		if o.Status != store.RunSkipped || !strings.Contains(o.Reason, "min-messages-for-summarize") || !o.Retried && o.HTTPStatus != 200 {
			t.Fatalf("too few messages: %+v", o)
		}
		h.conversation(1, "c4", "t1-4", 4)
		fake.SetHandler(func(llmtest.Received) llmtest.Reply { return llmtest.Reply{Status: 400, Content: "model not found"} })
		o = summarizeManually(t, h, url("c4"), 1, "c4")
		if o.Status != store.RunFailed || !strings.Contains(o.Reason, "model not found") || !strings.Contains(o.Reason, "dead-lettered") ||
			!o.Retried && (o.HTTPStatus != 500 || !strings.HasPrefix(o.Msg, "记忆提取失败: ")) {
			t.Fatalf("failing LLM: %+v", o)
		}
		if notes, _ := h.ws.ListContent(context.Background(), 1, "memory/", 0); len(notes) != 1 || strings.Contains(notes[0].Content, "t1-4") {
			t.Fatalf("daily note after the failure %+v", notes)
		}

		// The ledger shows all of it.
		st, r := call(t, "GET", srv.URL+"/api/v1/memory/1/runs?kind=summarize&limit=50", "", "")
		var runs struct {
			Count int `json:"count"`
			Runs  []struct {
				Status  string `json:"status"`
				EventID string `json:"eventId"`
			} `json:"runs"`
		}
		_ = json.Unmarshal(r.Data, &runs)
		if st != 200 || runs.Count < 5 || runs.Runs[0].Status != store.RunFailed {
			t.Fatalf("runs: %d %s", st, r.Data)
		}
		if st, _ := call(t, "GET", srv.URL+"/api/v1/memory/1/runs?kind=other", "", ""); st != 400 {
			t.Fatalf("bad kind: %d", st)
		}
	})
}

// With no worker running, the manual endpoint answers 202 pending at its timeout, not a
// false "completed".
func TestManualSummarizeWithoutWorker(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t), withSettings(func(s *Settings) { s.ManualTimeout = 300 * time.Millisecond }))
	srv := h.httpServer()
	st, r := call(t, "POST", srv.URL+"/api/v1/memory/1/summarize/c1", "", "")
	var o struct{ Status, RequestID string }
	_ = json.Unmarshal(r.Data, &o)
	if st != 202 || o.Status != "pending" || o.RequestID == "" {
		t.Fatalf("%d %s", st, r.Data)
	}
}

// With no worker pulling from the consumer (an api alone against an external NATS), the
// manual endpoint says so within a few seconds instead of waiting its whole timeout.
func TestManualSummarizeAnswersAtOnceWithoutWorker(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t), withSettings(func(s *Settings) { s.ManualTimeout = 2 * time.Minute }))
	srv := h.httpServer()
	h.conversation(1, "c1", "t1-1", 4)
	start := time.Now()
	st, r := call(t, "POST", srv.URL+"/api/v1/memory/1/summarize/c1", "", "")
	took := time.Since(start)
	var o struct {
		Status, RequestID, Reason string
		NoWorker                  bool
	}
	_ = json.Unmarshal(r.Data, &o)
	if st != 202 || o.Status != "pending" || !o.NoWorker || !strings.Contains(o.Reason, "no summarizer worker is pulling") {
		t.Fatalf("%d %s", st, r.Data)
	}
	if took > 30*time.Second {
		t.Fatalf("answered after %s: it waited for the timeout", took)
	}
	// The request stays queued: a worker started now runs it.
	h.worker(h.service("w1"))
	poll.Until(t, 20*time.Second, "the queued request ran", func() bool {
		runs := h.runs(o.RequestID)
		return len(runs) > 0 && runs[0].Status == store.RunCompleted
	})
}

func TestDeadLetterEndpoints(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t))
	srv := h.httpServer(config.APIKey{Key: "k1", Agents: []string{"*"}}, config.APIKey{Key: "ops", Admin: true})
	h.worker(h.service("w1"))
	if _, err := h.js.Publish(context.Background(), "mate.conversation.completed.5", []byte(`{"eventId":"bad","agentId":5}`)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "dead-lettered", h.settled)
	if st, _ := call(t, "GET", srv.URL+"/api/v1/admin/dlq", "k1", ""); st != 403 {
		t.Fatalf("non-admin key: %d", st)
	}
	st, r := call(t, "GET", srv.URL+"/api/v1/admin/dlq?subject=mate.conversation.completed.5", "ops", "")
	var list struct {
		Count       int `json:"count"`
		DeadLetters []struct {
			Seq     uint64          `json:"seq"`
			Subject string          `json:"subject"`
			Reason  string          `json:"reason"`
			Payload json.RawMessage `json:"payload"`
		} `json:"deadLetters"`
	}
	_ = json.Unmarshal(r.Data, &list)
	if st != 200 || list.Count != 1 || list.DeadLetters[0].Subject != "mate.conversation.completed.5" ||
		!strings.Contains(list.DeadLetters[0].Reason, "conversationId is empty") ||
		!bytes.Contains(list.DeadLetters[0].Payload, []byte(`"eventId":"bad"`)) {
		t.Fatalf("list: %d %s", st, r.Data)
	}
	seq := list.DeadLetters[0].Seq
	st, r = call(t, "POST", srv.URL+"/api/v1/admin/dlq/"+itoa(seq)+"/retry", "ops", "")
	if st != 202 || !strings.Contains(string(r.Data), `"subject":"mate.conversation.completed.5"`) {
		t.Fatalf("retry: %d %s %s", st, r.Msg, r.Data)
	}
	if st, _ := call(t, "POST", srv.URL+"/api/v1/admin/dlq/"+itoa(seq)+"/retry", "ops", ""); st != 404 {
		t.Fatalf("second retry: %d", st)
	}
	// Still poison: dead-lettered again, with the new stream sequence.
	poll.Until(t, 10*time.Second, "dead-lettered again", func() bool {
		_, r := call(t, "GET", srv.URL+"/api/v1/admin/dlq", "ops", "")
		_ = json.Unmarshal(r.Data, &list)
		return list.Count == 1 && list.DeadLetters[0].Seq != seq
	})
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }
