package emergence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/rest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/memedit"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// today in the tests' clock (agents are in UTC unless a test says otherwise).
var today = time.Date(2026, 4, 3, 20, 0, 0, 0, time.UTC)

const leaseTTL = time.Second

type fixture struct {
	t      *testing.T
	db     storetest.DB
	dial   bus.Dialer
	js     jetstream.JetStream
	ws     *workspace.Service
	ledger *ledger.Ledger
	fake   *llmtest.Server
	worker *emergence.Worker
	srv    *httptest.Server
	cfg    emergence.Config
	quiet  *slog.Logger
	// prompts is the prompt override folder (mate.prompts.dir); "" for the embedded ones.
	prompts string
}

type option func(*fixture)

func offline(f *fixture) { f.fake = nil }

func withConfig(fn func(*emergence.Config)) option { return func(f *fixture) { fn(&f.cfg) } }

func newFixture(t *testing.T, db storetest.DB, h func(llmtest.Received) llmtest.Reply, opts ...option) *fixture {
	t.Helper()
	_, d := bustest.Server(t)
	f := &fixture{t: t, db: db, dial: d, quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.js = f.connect("test")
	clock := func() time.Time { return today }
	f.ws = workspace.New(db.DB, workspace.WithDefaults("en", "UTC"), workspace.WithClock(clock))
	f.ledger = ledger.New(db.DB, nil)
	f.fake = llmtest.New(t, h)
	f.cfg = emergence.Config{Enabled: true, DayRange: 7, MaxDeliver: 5, AckWait: 10 * time.Second,
		Stream: emergence.StreamConfig(1, time.Hour, 10*time.Minute), DLQ: bus.DLQStreamConfig(1, time.Hour),
		LeaseRetry: 30 * time.Millisecond, RetryBase: 30 * time.Millisecond}
	for _, o := range opts {
		o(f)
	}
	wjs := f.connect("worker")
	leases, err := lease.Bucket(context.Background(), wjs, bus.BucketLease, leaseTTL, 1, "emergence-test")
	if err != nil {
		t.Fatal(err)
	}
	var client llm.Client
	if f.fake != nil {
		client = llm.NewOpenAI(f.fake.Config())
	}
	f.worker = emergence.NewWorker(wjs, f.ws, f.ledger, leases, client, prompt.NewLoader(f.prompts), f.cfg,
		emergence.WithClock(clock), emergence.WithLogger(f.quiet), emergence.WithRegistry(prometheus.NewRegistry()))
	if err := f.worker.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.worker.Stop)
	s := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), f.quiet)
	rest.RegisterEmergence(s, emergence.NewTrigger(f.connect("api"), 15*time.Second))
	f.srv = httptest.NewServer(apitest.New(t, s, nil).Wrap(s)) // responses held against the OpenAPI document
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) connect(name string) jetstream.JetStream {
	f.t.Helper()
	nc, err := f.dial.Connect(name)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		f.t.Fatal(err)
	}
	return js
}

func (f *fixture) write(agent int64, name, content string) workspace.File {
	f.t.Helper()
	file, _, err := f.ws.Write(context.Background(), agent, name, content, workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI})
	if err != nil {
		f.t.Fatal(err)
	}
	return file
}

func (f *fixture) memory(agent int64) workspace.File {
	f.t.Helper()
	file, err := f.ws.Get(context.Background(), agent, "MEMORY.md")
	if err != nil {
		f.t.Fatal(err)
	}
	return file
}

type answer struct {
	Code int              `json:"code"`
	Msg  string           `json:"msg"`
	Data emergence.Result `json:"data"`
}

func (f *fixture) trigger(agent int64) (int, answer) {
	f.t.Helper()
	resp, err := http.Post(fmt.Sprintf("%s/api/v1/memory/%d/emergence", f.srv.URL, agent), "application/json", nil)
	if err != nil {
		f.t.Error(err)
		return 0, answer{}
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		f.t.Error(err)
	}
	return resp.StatusCode, a
}

func (f *fixture) runs(agent int64) []ledger.Run {
	f.t.Helper()
	runs, err := f.ledger.List(context.Background(), ledger.Filter{AgentID: agent, Kind: ledger.KindEmergence})
	if err != nil {
		f.t.Fatal(err)
	}
	return runs
}

func jsonReply(shouldUpdate bool, reason, content string) string {
	b, _ := json.Marshal(map[string]any{"should_update": shouldUpdate, "reason": reason, "memory_content": content})
	return string(b)
}

// richMemory is a MEMORY.md worth guarding.
const richMemory = `# MEMORY.md — Core memory

## Project background
- Building MateMemory, a Go rebuild of an agent-memory system on NATS JetStream.
- Production runs on a three-node NATS cluster with MariaDB; local development uses SQLite.

## Key decisions
- 2026-03-02 — chose watermill-nats over hand-written consumers — fewer moving parts.
- 2026-03-10 — leases in NATS KV rather than Redis — one fewer service to run.

## Open tasks
- Write the operator runbook for dead letters.
- Benchmark the summarizer on a 2-core machine.

## Lessons and conventions
- The user prefers short answers with code first, explanation after.
- Tests never sleep to wait; they poll with deadlines.
`

func TestManualTriggerConsolidates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var f *fixture
		f = newFixture(t, db, func(r llmtest.Received) llmtest.Reply {
			cur := f.memory(1).Content
			next := cur + "\n## Recurring\n- The user reviews pull requests every morning (seen on 3 days). api_key=sk-abcdefghijklmnopqrstuvwxyz123456\n"
			return llmtest.Reply{Content: "Here is the consolidation:\n```json\n" + jsonReply(true, "a habit recurs", next) + "\n```\nDone."}
		})
		f.write(1, "memory/2026-04-03.md", "# 2026-04-03\n\n- Reviewed pull requests first thing.\n")
		f.write(1, "memory/2026-04-01.md", "# 2026-04-01\n\n- Morning PR review again; {{daily_notes}} stays text.\n")
		f.write(1, "memory/2026-03-20.md", "# 2026-03-20\n\n- Too old to be read.\n")
		f.write(1, "memory/notes.md", "not a daily note\n")
		before := f.memory(1)

		st, a := f.trigger(1)
		if st != 200 || a.Code != 200 || a.Data.Status != "completed" || a.Data.RunID == "" {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		after := f.memory(1)
		if after.Version != before.Version+1 || !strings.Contains(after.Content, "reviews pull requests every morning") {
			t.Fatalf("MEMORY.md v%d: %q", after.Version, after.Content)
		}
		if strings.Contains(after.Content, "sk-abcdefghijklmnopqrstuvwxyz") || !strings.Contains(after.Content, "[REDACTED]") {
			t.Fatalf("secret not redacted: %q", after.Content)
		}
		hist, err := f.ws.History(context.Background(), 1, "MEMORY.md")
		if err != nil || len(hist) == 0 || hist[0].Content != before.Content || hist[0].Actor != store.ActorEmergence || hist[0].Ref != a.Data.RunID {
			t.Fatalf("history %+v (%v); want the previous version kept, by emergence, run %s", hist, err, a.Data.RunID)
		}
		runs := f.runs(1)
		if len(runs) != 1 || runs[0].Status != store.RunCompleted || runs[0].RunID != a.Data.RunID ||
			strings.Join(runs[0].FilesChanged, ",") != "MEMORY.md" || runs[0].TokensIn == 0 || runs[0].Provider != "llm" ||
			!strings.HasPrefix(runs[0].EventID, "manual:") {
			t.Fatalf("ledger %+v", runs)
		}

		got := f.fake.Received()
		if len(got) != 1 || len(got[0].Messages) != 2 {
			t.Fatalf("model calls %+v", got)
		}
		user := got[0].Messages[1].Content
		i3, i1 := strings.Index(user, "### memory/2026-04-03.md\n# 2026-04-03"), strings.Index(user, "### memory/2026-04-01.md\n# 2026-04-01")
		if i3 < 0 || i1 < 0 || i3 > i1 {
			t.Fatalf("notes not rendered newest first as ### memory/YYYY-MM-DD.md:\n%s", user)
		}
		for _, absent := range []string{"2026-03-20", "memory/notes.md"} {
			if strings.Contains(user, absent) {
				t.Fatalf("prompt contains %s:\n%s", absent, user)
			}
		}
		if !strings.Contains(user, "{{daily_notes}} stays text") || !strings.Contains(user, before.Content) {
			t.Fatalf("prompt lacks the note text or MEMORY.md:\n%s", user)
		}
		if got[0].ResponseFormat == nil || got[0].ResponseFormat.Type != "json_object" {
			t.Fatalf("response_format %+v", got[0].ResponseFormat)
		}
	})
}

// TestConsolidationIsTrimmed: memory_content is written trimmed, the same as the summarizer
// writes memory_update.
func TestConsolidationIsTrimmed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var f *fixture
		f = newFixture(t, db, func(r llmtest.Received) llmtest.Reply {
			next := "\n\n  " + strings.TrimSpace(f.memory(6).Content) + "\n- The user reviews pull requests daily.\n\n \n"
			return llmtest.Reply{Content: jsonReply(true, "a habit recurs", next)}
		})
		f.write(6, "MEMORY.md", richMemory)
		f.write(6, "memory/2026-04-03.md", "# 2026-04-03\n\n- Reviewed pull requests first thing.\n")
		if st, a := f.trigger(6); st != 200 || a.Data.Status != "completed" {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		got := f.memory(6).Content
		if want := strings.TrimSpace(richMemory) + "\n- The user reviews pull requests daily."; got != want {
			t.Fatalf("MEMORY.md = %q\nwant %q", got, want)
		}
	})
}

func TestDestructiveConsolidationIsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: jsonReply(true, "simplified", "# MEMORY.md\n\n- The user reviews pull requests.\n")}
		})
		f.write(2, "MEMORY.md", richMemory)
		f.write(2, "memory/2026-04-02.md", "# 2026-04-02\n\n- PR review.\n")
		before := f.memory(2)
		histBefore, _ := f.ws.History(context.Background(), 2, "MEMORY.md")

		st, a := f.trigger(2)
		if st != 200 || a.Data.Status != "skipped" || a.Data.RunStatus != store.RunRefused || !strings.Contains(a.Data.Reason, "refused") {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		after := f.memory(2)
		if after.Version != before.Version || after.Content != richMemory {
			t.Fatalf("MEMORY.md changed: v%d→v%d", before.Version, after.Version)
		}
		if hist, _ := f.ws.History(context.Background(), 2, "MEMORY.md"); len(hist) != len(histBefore) {
			t.Fatalf("history grew from %d to %d entries", len(histBefore), len(hist))
		}
		if runs := f.runs(2); len(runs) != 1 || runs[0].Status != store.RunRefused || len(runs[0].FilesChanged) != 0 {
			t.Fatalf("ledger %+v", runs)
		}
		// A cut-off answer is refused too.
		f.fake.SetHandler(func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: jsonReply(true, "more", richMemory+"\n- extra"), FinishReason: "length"}
		})
		if st, a := f.trigger(2); st != 200 || a.Data.RunStatus != store.RunRefused || !strings.Contains(a.Data.Reason, "token limit") {
			t.Fatalf("truncated: %d %+v", st, a)
		}
		if f.memory(2).Version != before.Version {
			t.Fatal("MEMORY.md changed by a truncated answer")
		}
	})
}

func TestSkips(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: jsonReply(false, "nothing new recurs", "")}
		})
		// No notes in range: no model call.
		f.write(3, "memory/2026-03-01.md", "# old\n\n- long ago\n")
		st, a := f.trigger(3)
		if st != 200 || a.Data.Status != "skipped" || !strings.Contains(a.Data.Reason, "no daily notes from 2026-03-28 to 2026-04-03") {
			t.Fatalf("no notes: %d %+v", st, a)
		}
		if n := f.fake.Calls.Load(); n != 0 {
			t.Fatalf("%d model calls without notes", n)
		}
		// The model says no.
		f.write(3, "memory/2026-03-28.md", "# 2026-03-28\n\n- small talk\n")
		v := f.memory(3).Version
		st, a = f.trigger(3)
		if st != 200 || a.Data.Status != "skipped" || !strings.Contains(a.Data.Reason, "nothing new recurs") {
			t.Fatalf("should_update false: %d %+v", st, a)
		}
		if f.memory(3).Version != v {
			t.Fatal("MEMORY.md written although should_update was false")
		}
	})
}

func TestOfflineAndDisabledSkip(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, nil, offline)
	f.write(4, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
	if st, a := f.trigger(4); st != 200 || a.Data.Status != "skipped" || a.Data.Reason != emergence.ReasonNoLLM {
		t.Fatalf("offline: %d %+v", st, a)
	}
	if runs := f.runs(4); len(runs) != 1 || runs[0].Provider != "offline" || runs[0].Status != store.RunSkipped {
		t.Fatalf("ledger %+v", runs)
	}
	g := newFixture(t, storetest.SQLite(t), func(llmtest.Received) llmtest.Reply { return llmtest.Reply{} },
		withConfig(func(c *emergence.Config) { c.Enabled = false }))
	if st, a := g.trigger(4); st != 200 || a.Data.Status != "skipped" || !strings.Contains(a.Data.Reason, "emergence-enabled=false") {
		t.Fatalf("disabled: %d %+v", st, a)
	}
}

// The summarizer holds the agent's lease: emergence must not touch the agent until it is
// released, and then it completes (nothing is dropped).
func TestWaitsForTheSummarizersLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var released atomic.Int64 // unix nanos of the release
		var calledEarly atomic.Bool
		var f *fixture
		f = newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			if r := released.Load(); r == 0 || time.Now().UnixNano() < r {
				calledEarly.Store(true)
			}
			return llmtest.Reply{Content: jsonReply(true, "merge", f.memory(5).Content+"\n- consolidated\n")}
		}, withConfig(func(c *emergence.Config) { c.MaxDeliver = 20 }))
		f.write(5, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
		summarizer, err := lease.Bucket(context.Background(), f.connect("summarizer"), bus.BucketLease, leaseTTL, 1, "summarizer-1")
		if err != nil {
			t.Fatal(err)
		}
		held, err := summarizer.Acquire(context.Background(), 5, "summarize")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var st int
		var a answer
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, a = f.trigger(5)
		}()
		// Redelivered several times while the lease is held, and held past its TTL (renewed).
		heldSince := time.Now()
		poll.Until(t, 15*time.Second, "deferrals", func() bool {
			if time.Since(heldSince) < leaseTTL+leaseTTL/2 {
				return false
			}
			n := 0
			for _, r := range f.runs(5) {
				if r.Status == store.RunDeferred {
					n++
				}
			}
			return n >= 3
		})
		if f.fake.Calls.Load() != 0 {
			t.Fatal("the model was called while the summarizer held the lease")
		}
		released.Store(time.Now().UnixNano())
		if err := held.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if st != 200 || a.Data.Status != "completed" {
			t.Fatalf("after release: %d %+v", st, a)
		}
		if calledEarly.Load() {
			t.Fatal("the model was called before the lease was released")
		}
		runs := f.runs(5)
		if runs[0].Status != store.RunCompleted || !strings.Contains(runs[len(runs)-1].Reason, "summarizer-1") {
			t.Fatalf("ledger %+v", runs)
		}
		// And the other way round: while emergence holds the lease, the summarizer cannot.
		f.fake.SetHandler(func(llmtest.Received) llmtest.Reply {
			if _, err := summarizer.Acquire(context.Background(), 5, "summarize"); err == nil {
				calledEarly.Store(true)
			}
			return llmtest.Reply{Content: jsonReply(false, "no", "")}
		})
		if st, _ := f.trigger(5); st != 200 || calledEarly.Load() {
			t.Fatalf("the summarizer got the lease during emergence (%d)", st)
		}
	})
}

// A tool edit that lands during the model call: the worker re-reads and asks again, and the
// edit survives.
func TestConcurrentEditIsNotLost(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var calls atomic.Int32
		var f *fixture
		f = newFixture(t, db, func(r llmtest.Received) llmtest.Reply {
			cur := f.memory(6).Content
			if calls.Add(1) == 1 {
				// The agent's tool writes while the model is thinking.
				f.write(6, "MEMORY.md", cur+"\n- Added by a tool mid-call.\n")
			}
			return llmtest.Reply{Content: jsonReply(true, "merge", cur+"\n- consolidated\n")}
		})
		f.write(6, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
		st, a := f.trigger(6)
		if st != 200 || a.Data.Status != "completed" {
			t.Fatalf("%d %+v", st, a)
		}
		mem := f.memory(6).Content
		if calls.Load() != 2 || !strings.Contains(mem, "Added by a tool mid-call.") || !strings.Contains(mem, "consolidated") {
			t.Fatalf("%d model calls; MEMORY.md %q", calls.Load(), mem)
		}
		if !strings.Contains(f.fake.Received()[1].Messages[1].Content, "Added by a tool mid-call.") {
			t.Fatal("the second call did not see the tool's edit")
		}
	})
}

func deadLetters(t *testing.T, js jetstream.JetStream) []bus.DeadLetterEntry {
	t.Helper()
	dl, err := bus.ListDeadLetters(context.Background(), js, 0, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return dl
}

func TestFailuresAnswer500AndDeadLetter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Status: 400, Content: "model not found"}
		})
		f.write(7, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
		st, a := f.trigger(7)
		if st != 500 || a.Code != 500 || !strings.HasPrefix(a.Msg, "记忆整合失败: ") {
			t.Fatalf("permanent failure: %d %+v", st, a)
		}
		poll.Until(t, 15*time.Second, "dead letter", func() bool { return len(deadLetters(t, f.js)) == 1 })
		if dl := deadLetters(t, f.js)[0]; dl.Subject != "mate.memory.emergence.7" || !strings.Contains(dl.Reason, "model call refused") {
			t.Fatalf("dead letter %+v", dl)
		}
		// An answer that is not the JSON contract.
		f.fake.SetHandler(func(llmtest.Received) llmtest.Reply { return llmtest.Reply{Content: "I think MEMORY.md is fine."} })
		if st, a := f.trigger(7); st != 500 || !strings.Contains(a.Msg, "should_update") {
			t.Fatalf("unparseable: %d %+v", st, a)
		}
		// A transient failure is answered, then retried until it works.
		var n atomic.Int32
		f.fake.SetHandler(func(llmtest.Received) llmtest.Reply {
			if n.Add(1) == 1 {
				return llmtest.Reply{Status: 503, Content: "overloaded"}
			}
			return llmtest.Reply{Content: jsonReply(false, "nothing", "")}
		})
		st, a = f.trigger(7)
		if st != 500 || !strings.Contains(a.Msg, "will be retried") {
			t.Fatalf("transient: %d %+v", st, a)
		}
		poll.Until(t, 15*time.Second, "the retry", func() bool { return f.runs(7)[0].Status == store.RunSkipped })
	})
}

func TestPoisonAndExhaustedRequestsAreDeadLettered(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, func(llmtest.Received) llmtest.Reply { return llmtest.Reply{} },
		withConfig(func(c *emergence.Config) { c.MaxDeliver = 3 }))
	ctx := context.Background()
	if _, err := f.js.Publish(ctx, "mate.memory.emergence.9", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.js.Publish(ctx, "mate.memory.emergence.9", []byte(`{"requestId":"x","agentId":10}`)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "poison dead letters", func() bool { return len(deadLetters(t, f.js)) == 2 })
	for _, dl := range deadLetters(t, f.js) {
		if !strings.HasPrefix(dl.Reason, "poison:") {
			t.Fatalf("dead letter %+v", dl)
		}
	}
	// The lease stays held through every delivery: the request is dead-lettered, not lost.
	holder, _ := lease.Bucket(ctx, f.connect("summarizer"), bus.BucketLease, leaseTTL, 1, "summarizer-1")
	held, err := holder.Acquire(ctx, 11, "summarize")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	if _, err := emergence.Publish(ctx, f.js, emergence.Request{RequestID: "cron:1:2026-04-03T18:00:00Z", AgentID: 11, Source: emergence.SourceCron}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "exhausted dead letter", func() bool { return len(deadLetters(t, f.js)) == 3 })
	dl := deadLetters(t, f.js)[2]
	if !strings.Contains(dl.Reason, "lease was held at each of 3 deliveries") || dl.MsgID != "cron:1:2026-04-03T18:00:00Z" {
		t.Fatalf("dead letter %+v", dl)
	}
}

func TestDayRangeIsCalendarDaysInTheAgentsZone(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Content: jsonReply(false, "no", "")}
	}, withConfig(func(c *emergence.Config) { c.DayRange = 2 }))
	// 2026-04-03 20:00Z is already 2026-04-04 in Shanghai: the window is 04-03..04-04.
	if _, err := f.ws.UpdateAgent(context.Background(), 12, "zh", "Asia/Shanghai"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"2026-04-05", "2026-04-04", "2026-04-03", "2026-04-02"} {
		f.write(12, "memory/"+d+".md", "# "+d+"\n\n- 记录\n")
	}
	if st, a := f.trigger(12); st != 200 || a.Data.Status != "skipped" {
		t.Fatalf("%d %+v", st, a)
	}
	user := f.fake.Received()[0].Messages[1].Content
	if !strings.Contains(user, "今天是 2026-04-04") || !strings.Contains(user, "### memory/2026-04-04.md") ||
		!strings.Contains(user, "### memory/2026-04-03.md") || strings.Contains(user, "2026-04-02.md") || strings.Contains(user, "2026-04-05.md") {
		t.Fatalf("window in Asia/Shanghai:\n%s", user)
	}
}

func TestParseReply(t *testing.T) {
	cases := []struct {
		in      string
		want    emergence.Reply
		wantErr string
	}{
		{`{"should_update":true,"reason":"r","memory_content":"# M"}`, emergence.Reply{ShouldUpdate: true, Reason: "r", MemoryContent: "# M"}, ""},
		{"```json\n{\"should_update\": false, \"reason\": \"none\", \"memory_content\": \"\"}\n```", emergence.Reply{Reason: "none"}, ""},
		{"Sure! {\"note\": {\"x\": 1}} Here: {\"should_update\": \"true\", \"reason\": \"r\", \"memory_content\": \"a {b} c\"} hope it helps", emergence.Reply{ShouldUpdate: true, Reason: "r", MemoryContent: "a {b} c"}, ""},
		{`{"should_update":false,"reason":"r","memory_content":null}`, emergence.Reply{Reason: "r"}, ""},
		{"no json here", emergence.Reply{}, "no JSON object"},
		{`{"should_update":"maybe"}`, emergence.Reply{}, "expected true or false"},
		{`{"should_update":true,"memory_content":["a"]}`, emergence.Reply{}, "not a string"},
		{`{"should_update":true,"reason":"r","memory_edits":[{"op":"delete","old":"- x"}]}`,
			emergence.Reply{ShouldUpdate: true, Reason: "r", MemoryEdits: []memedit.Edit{{Op: "delete", Old: "- x"}}}, ""},
		{`{"should_update":true,"memory_edits":[{"op":"move","old":"- x"}]}`, emergence.Reply{}, `memory_edits[0]: op must be add, replace or delete, got "move"`},
		{`{"should_update":true,"memory_content":"# M","memory_edits":[{"op":"delete","old":"- x"}]}`, emergence.Reply{}, "both given"},
	}
	for _, c := range cases {
		got, err := emergence.ParseReply(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseReply(%q): err %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseReply(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// The durable consumer outlives its workers: a request published while no worker runs is
// handled by the next one to start.
func TestRequestsWaitForAWorker(t *testing.T) {
	db := storetest.SQLite(t)
	var f *fixture
	f = newFixture(t, db, func(llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Content: jsonReply(true, "merge", f.memory(13).Content+"\n- consolidated\n")}
	})
	f.write(13, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
	f.worker.Stop()
	ctx := context.Background()
	if _, err := f.js.Consumer(ctx, emergence.Stream, emergence.Consumer); err != nil {
		t.Fatalf("durable consumer gone after the worker stopped: %v", err)
	}
	if _, err := emergence.Publish(ctx, f.js, emergence.Request{RequestID: "cron:2:2026-04-03T02:00:00Z", AgentID: 13, Source: emergence.SourceCron}); err != nil {
		t.Fatal(err)
	}
	// A manual trigger that finds no worker answers 202 pending when its wait runs out.
	resp, err := http.Post(f.srv.URL+"/api/v1/memory/13/emergence?waitSeconds=1", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if resp.StatusCode != 202 || a.Data.Status != "pending" || !strings.HasPrefix(a.Data.RequestID, "manual:") {
		t.Fatalf("no worker: %d %+v", resp.StatusCode, a)
	}
	leases, err := lease.Bucket(ctx, f.connect("worker-2"), bus.BucketLease, leaseTTL, 1, "emergence-2")
	if err != nil {
		t.Fatal(err)
	}
	w2 := emergence.NewWorker(f.connect("worker-2js"), f.ws, f.ledger, leases, llm.NewOpenAI(f.fake.Config()), prompt.NewLoader(""), f.cfg,
		emergence.WithClock(func() time.Time { return today }), emergence.WithLogger(f.quiet))
	if err := w2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w2.Stop)
	// Both requests are handled; the second finds MEMORY.md already consolidated by the first
	// and consolidates again on top (the fake model always adds a line).
	poll.Until(t, 15*time.Second, "the new worker to handle both requests", func() bool {
		done := map[string]bool{}
		for _, r := range f.runs(13) {
			if r.Status == store.RunCompleted {
				done[r.EventID] = true
			}
		}
		return done["cron:2:2026-04-03T02:00:00Z"] && done[a.Data.RequestID]
	})
}
