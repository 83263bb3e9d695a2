package window

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// counter is shared by the tests: loading a vocabulary takes a fraction of a second.
var counter = tokens.NewCounter()

// env is one database, one NATS server and one fake LLM; replicas are built on it.
type env struct {
	t      testing.TB
	db     storetest.DB
	dialer bus.Dialer
	llm    *llmtest.Server
	msgs   *conversation.Store
	// js is a connection of the test itself (streams, KV inspection).
	js jetstream.JetStream
}

func newEnv(t testing.TB, db storetest.DB) *env {
	t.Helper()
	_, dialer := bustest.Server(t)
	e := &env{t: t, db: db, dialer: dialer, msgs: conversation.New(db.DB)}
	e.llm = llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Content: "摘要：用户和助手讨论了早期的话题，已确认若干事实。"}
	})
	e.js = e.connect("test")
	return e
}

func (e *env) connect(name string) jetstream.JetStream {
	e.t.Helper()
	nc, err := e.dialer.Connect(name)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	return js
}

func windowConfig() config.Window {
	return config.Default().Mate.Agent.Conversation.Window
}

// replica is one API instance: its own NATS connection, workspace service and window
// service over the shared database, NATS server and LLM.
type replica struct {
	svc  *Service
	ws   *workspace.Service
	http *httptest.Server
}

type replicaOpts struct {
	cfg   config.Window
	noLLM bool
	opts  []Option
	// log receives the service's log (discarded when nil).
	log *slog.Logger
}

func (e *env) replica(name string, o replicaOpts) *replica {
	e.t.Helper()
	if o.cfg == (config.Window{}) {
		o.cfg = windowConfig()
	}
	ws := workspace.New(e.db.DB)
	var client llm.Client
	if !o.noLLM {
		client = llm.NewOpenAI(e.llm.Config())
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	svc, err := New(context.Background(), o.cfg, Deps{
		JS: e.connect(name), History: StoreHistory{Messages: e.msgs}, Workspace: ws, Watermarks: e.msgs,
		LLM: client, Counter: counter, Log: o.log,
	}, append([]Option{WithOwner(name)}, o.opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	srv := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	registerRoutes(srv, svc)
	hs := apitest.Serve(e.t, srv) // every response is held against the OpenAPI document
	return &replica{svc: svc, ws: ws, http: hs}
}

// post sends a context request and decodes the envelope; status is the HTTP status.
func (r *replica) post(t testing.TB, agentID int64, conv string, body any, retry bool) (int, *Result, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/api/v1/agents/%d/conversations/%s/context", r.http.URL, agentID, conv)
	if retry {
		url += "/retry"
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Code int             `json:"code"`
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, env.Msg
	}
	var res Result
	if err := json.Unmarshal(env.Data, &res); err != nil {
		t.Fatalf("decode result %s: %v", env.Data, err)
	}
	return resp.StatusCode, &res, ""
}

// exchange builds one user/assistant exchange, optionally with a tool call in between.
func exchange(i int, withTool bool, filler string) []conversation.Message {
	out := []conversation.Message{{Role: "user", Content: fmt.Sprintf("第%d个问题：%s", i, filler)}}
	if withTool {
		id := fmt.Sprintf("call_%d", i)
		out = append(out,
			conversation.Message{Role: "assistant", ToolCalls: json.RawMessage(fmt.Sprintf(
				`[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":%d}"}}]`, id, i))},
			conversation.Message{Role: "tool", ToolCallID: id, Content: fmt.Sprintf(`{"result":%d}`, i)})
	}
	return append(out, conversation.Message{Role: "assistant", Content: fmt.Sprintf("Answer %d: %s", i, filler)})
}

// store adds n exchanges (every third with a tool call) to a conversation.
func (e *env) store(agentID int64, conv string, from, n int, filler string) []conversation.Message {
	e.t.Helper()
	var all []conversation.Message
	for i := from; i < from+n; i++ {
		for _, m := range exchange(i, i%3 == 0, filler) {
			m.AgentID, m.ConversationID = agentID, conv
			all = append(all, m)
		}
	}
	out, err := e.msgs.Add(context.Background(), all...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// checkWindow asserts the invariants every result must hold.
func checkWindow(t testing.TB, res *Result, userMessage string) {
	t.Helper()
	msgs := res.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != RoleUser || msgs[len(msgs)-1].Content != userMessage {
		t.Fatalf("the current user message is not last: %+v", msgs)
	}
	if res.Tokens.Total > res.Tokens.Budget {
		t.Fatalf("total %d exceeds budget %d", res.Tokens.Total, res.Tokens.Budget)
	}
	if res.Summarized+res.Trimmed+res.Kept != res.HistoryMessages {
		t.Fatalf("summarized %d + trimmed %d + kept %d != history %d", res.Summarized, res.Trimmed, res.Kept, res.HistoryMessages)
	}
	tk, _ := counter.ByEncoding(res.Tokenizer)
	var tm []tokens.Message
	for _, m := range msgs {
		tm = append(tm, counted(m))
	}
	if got := tokens.ChatTokens(tk, tm); got != res.Tokens.Total {
		t.Fatalf("reported total %d, recount %d", res.Tokens.Total, got)
	}
	for i, m := range msgs {
		if strings.HasPrefix(m.Content, MarkerZH) || strings.HasPrefix(m.Content, MarkerEN) {
			if m.Role != RoleUser {
				t.Fatalf("summary at %d is a %s message", i, m.Role)
			}
			if (i != 0 && msgs[0].Role != RoleSystem) || (msgs[0].Role == RoleSystem && i != 1) {
				t.Fatalf("summary at position %d, not right after the system prompt", i)
			}
		}
	}
	// Every tool result follows its call, and every call is followed by its results.
	for i, m := range msgs {
		if m.Role == RoleTool {
			ok := false
			for j := i - 1; j >= 0 && !ok; j-- {
				if msgs[j].Role != RoleTool {
					for _, c := range msgs[j].ToolCalls {
						ok = ok || c.ID == m.ToolCallID
					}
					break
				}
			}
			if !ok {
				t.Fatalf("tool result %d (%s) is separated from its call", i, m.ToolCallID)
			}
		}
	}
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
