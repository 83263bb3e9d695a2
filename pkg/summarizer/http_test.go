package summarizer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/config"
	"github.com/matememory/matememory/pkg/llm/llmtest"
	"github.com/matememory/matememory/pkg/store"
	"github.com/matememory/matememory/pkg/store/storetest"
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

		// An automatic extraction starts the 5-minute cooldown...
		h.publish(completed(1, "c1", "e-auto", 4))
		eventually(t, 20*time.Second, "auto event settled", h.settled)
		// ...which a manual request does not wait for.
		type outcome struct{ Status, Reason, RunID string }
		var o outcome
		st, r := call(t, "POST", srv.URL+"/api/v1/memory/1/summarize/c2", "", "")
		_ = json.Unmarshal(r.Data, &o)
		if st != 200 || o.Status != store.RunCompleted || o.RunID == "" {
			t.Fatalf("manual summarize: %d %s %s", st, r.Msg, r.Data)
		}
		notes, _ := h.ws.ListContent(context.Background(), 1, "memory/", 0)
		if len(notes) != 1 || !strings.Contains(notes[0].Content, "covered t1-2") {
			t.Fatalf("daily note %+v", notes)
		}
		st, r = call(t, "POST", srv.URL+"/api/v1/memory/1/summarize/c2", "", "")
		_ = json.Unmarshal(r.Data, &o)
		if st != 200 || o.Status != store.RunSkipped || !strings.Contains(o.Reason, "already extracted") {
			t.Fatalf("second manual summarize: %d %s", st, r.Data)
		}
		st, r = call(t, "POST", srv.URL+"/api/v1/memory/1/summarize/few", "", "")
		_ = json.Unmarshal(r.Data, &o)
		if st != 200 || o.Status != store.RunSkipped || !strings.Contains(o.Reason, "min-messages-for-summarize") {
			t.Fatalf("too few messages: %d %s", st, r.Data)
		}
		h.conversation(1, "c4", "t1-4", 4)
		fake.SetHandler(func(llmtest.Received) llmtest.Reply { return llmtest.Reply{Status: 400, Content: "model not found"} })
		st, r = call(t, "POST", srv.URL+"/api/v1/memory/1/summarize/c4", "", "")
		if st != 500 || !strings.HasPrefix(r.Msg, "记忆提取失败: ") || !strings.Contains(r.Msg, "model not found") {
			t.Fatalf("failing LLM: %d %q", st, r.Msg)
		}

		// The ledger shows all of it.
		st, r = call(t, "GET", srv.URL+"/api/v1/memory/1/runs?kind=summarize&limit=50", "", "")
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
	eventually(t, 20*time.Second, "the queued request ran", func() bool {
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
	eventually(t, 10*time.Second, "dead-lettered", h.settled)
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
	eventually(t, 10*time.Second, "dead-lettered again", func() bool {
		_, r := call(t, "GET", srv.URL+"/api/v1/admin/dlq", "ops", "")
		_ = json.Unmarshal(r.Data, &list)
		return list.Count == 1 && list.DeadLetters[0].Seq != seq
	})
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }
