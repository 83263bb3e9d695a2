package summarizer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// harness is the pipeline on a real embedded NATS server and a real database, with the
// LLM faked over HTTP (llmtest) or absent (offline provider).
type harness struct {
	t       testing.TB
	db      storetest.DB
	ns      *server.Server
	dialer  bus.Dialer
	nc      *nats.Conn
	js      jetstream.JetStream
	ws      *workspace.Service
	msgs    *conversation.Store
	ledger  *ledger.Ledger
	set     Settings
	llm     *llmtest.Server
	llmCfg  llm.Config
	pub     *eventpub.Publisher
	metrics *Metrics
	now     func() time.Time
	// syncAlways starts the server with fsync on every write (the shipped embedded setting).
	syncAlways bool
	// cluster, when set, is used instead of an embedded server (h.ns stays nil).
	cluster *bustest.Cluster

	mu      sync.Mutex
	workers []*Worker
}

type harnessOption func(*harness)

func withSettings(fn func(*Settings)) harnessOption { return func(h *harness) { fn(&h.set) } }
func withLLM(s *llmtest.Server) harnessOption {
	return func(h *harness) { h.llm = s; h.llmCfg = s.Config() }
}

// withExternalLLM uses a fake model served by a child process (llmtest.NewExternal), so
// that this process's CPU time leaves the model's out, as it would a real one's.
func withExternalLLM(e *llmtest.External) harnessOption {
	return func(h *harness) { h.llmCfg = e.Config() }
}
func withLLMTimeout(d time.Duration) harnessOption {
	return func(h *harness) { h.llmCfg.Timeout = d }
}
func withClock(now func() time.Time) harnessOption { return func(h *harness) { h.now = now } }

// testSettings are small and fast: cooldown off, short backoff, a few deliveries.
func testSettings() Settings {
	cfg := config.Default()
	set := SettingsFrom(cfg)
	set.Memory.CooldownMinutes = 0
	set.MaxAge = time.Hour
	set.MaxDeliver = 4
	set.AckWait = 2 * time.Second
	set.LeaseTTL = time.Second
	set.BackoffBase = 20 * time.Millisecond
	set.BackoffMax = 200 * time.Millisecond
	set.Concurrency = 4
	set.ManualTimeout = 20 * time.Second
	set.DuplicateWindow = time.Minute
	return set
}

func newHarness(t testing.TB, db storetest.DB, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{t: t, db: db, set: testSettings(), now: time.Now}
	for _, o := range opts {
		o(h)
	}
	var err error
	if h.cluster != nil {
		h.dialer = h.cluster.Dialer()
	} else if h.syncAlways {
		h.ns, err = bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", SyncAlways: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.ns.Shutdown(); h.ns.WaitForShutdown() })
		h.dialer = bus.Dialer{URL: h.ns.ClientURL()}
	} else {
		h.ns, h.dialer = bustest.Server(t)
	}
	h.nc, err = h.dialer.Connect("test-core")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.nc.Close)
	h.js, err = jetstream.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = Provision(ctx, h.js, h.set)
	if err != nil {
		t.Fatal(err)
	}
	h.ws = workspace.New(h.db.DB, workspace.WithDefaults("zh", "UTC"), workspace.WithClock(h.now))
	h.msgs = conversation.New(h.db.DB)
	h.ledger = ledger.New(h.db.DB, nil)
	h.metrics = NewMetrics(prometheus.NewRegistry())
	pnc, err := h.dialer.Connect("test-publisher")
	if err != nil {
		t.Fatal(err)
	}
	h.pub, err = eventpub.NewPublisher(pnc, eventpub.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.pub.Close)
	t.Cleanup(h.stopWorkers)
	return h
}

func quietLog() *slog.Logger {
	if os.Getenv("MATE_DEBUG_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// service builds a Service with its own lease owner, as a separate worker process would.
func (h *harness) service(owner string) *Service {
	svc, _ := h.serviceConn(owner)
	return svc
}

// serviceConn is service whose lease manager uses its own connection, returned so a test
// can cut it (a worker process dying).
func (h *harness) serviceConn(owner string) (*Service, *nats.Conn) {
	h.t.Helper()
	nc, err := h.dialer.Connect("test-service-" + owner)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		h.t.Fatal(err)
	}
	lm, err := lease.Bucket(context.Background(), js, bus.BucketLease, h.set.LeaseTTL, 1, owner)
	if err != nil {
		h.t.Fatal(err)
	}
	d := Deps{Units: store.NewUnits(h.db.DB), Messages: conversation.New(h.db.DB), Workspace: h.ws, Ledger: h.ledger, Leases: lm,
		Metrics: h.metrics, Log: quietLog(), Now: h.now}
	if h.llmCfg.BaseURL != "" {
		d.LLM = llm.NewOpenAI(h.llmCfg)
	}
	return New(d, h.set), nc
}

// worker starts a worker for svc on its own connection.
func (h *harness) worker(svc *Service) *Worker {
	w, _ := h.workerConn(svc)
	return w
}

func (h *harness) workerConn(svc *Service) (*Worker, *nats.Conn) {
	h.t.Helper()
	nc, err := h.dialer.Connect("test-worker")
	if err != nil {
		h.t.Fatal(err)
	}
	w, err := NewWorker(context.Background(), svc, nc)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.workers = append(h.workers, w)
	h.mu.Unlock()
	return w, nc
}

func (h *harness) stopWorkers() {
	h.mu.Lock()
	ws := h.workers
	h.workers = nil
	h.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// conversation stores n messages alternating user/assistant; user messages read
// "<tag> question i ..." so tests can find them in prompts and notes.
func (h *harness) conversation(agentID int64, conv, tag string, n int) {
	h.t.Helper()
	var msgs []conversation.Message
	for i := 0; i < n; i++ {
		role, text := "user", fmt.Sprintf("%s question %d: how should we plan the release?", tag, i)
		if i%2 == 1 {
			role, text = "assistant", fmt.Sprintf("%s answer %d: start with the checklist.", tag, i)
		}
		msgs = append(msgs, conversation.Message{AgentID: agentID, ConversationID: conv, Role: role, Content: text})
	}
	if _, err := h.msgs.Add(context.Background(), msgs...); err != nil {
		h.t.Fatal(err)
	}
}

func completed(agentID int64, conv, id string, count int) *event.ConversationCompletedEvent {
	return &event.ConversationCompletedEvent{EventID: id, AgentID: agentID, ConversationID: conv,
		UserMessage: "how should we plan the release?", AssistantReply: "start with the checklist.",
		MessageCount: count, TriggerSource: event.TriggerWeb}
}

func (h *harness) publish(e *event.ConversationCompletedEvent) event.Ack {
	h.t.Helper()
	ack, err := h.pub.PublishCompleted(context.Background(), e)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack
}

// finalRun returns the last ledger row of an event that is final (not deferred, not a
// retried failure), if any.
func (h *harness) runs(eventID string) []ledger.Run {
	runs, err := h.ledger.List(context.Background(), ledger.Filter{EventID: eventID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

// settled reports whether the event's pipeline work is done: acked or dead-lettered. It
// asks the consumer: nothing pending and nothing waiting for an ack.
func (h *harness) settled() bool {
	c, err := h.js.Consumer(context.Background(), bus.StreamEvents, bus.ConsumerSummarizer)
	if err != nil {
		return false
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return false
	}
	s, err := h.js.Stream(context.Background(), bus.StreamEvents)
	if err != nil {
		return false
	}
	si, err := s.Info(context.Background())
	if err != nil {
		return false
	}
	return info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= si.State.LastSeq
}

func (h *harness) file(agentID int64, name string) (workspace.File, bool) {
	h.t.Helper()
	f, err := h.ws.Get(context.Background(), agentID, name)
	if err != nil {
		return f, false
	}
	return f, true
}

// snapshot is every live workspace file with its version, the watermarks and the applied
// effects: what "changes nothing" compares.
func (h *harness) snapshot() string { return h.snap(true) }

// fileSnapshot is snapshot without the watermark rows (registering a conversation adds one
// at message 0 before anything is extracted).
func (h *harness) fileSnapshot() string { return h.snap(false) }

func (h *harness) snap(withWatermarks bool) string {
	h.t.Helper()
	var files []store.WorkspaceFile
	if err := h.db.DB.Order("agent_id, filename").Find(&files).Error; err != nil {
		h.t.Fatal(err)
	}
	var wms []store.ExtractionWatermark
	if err := h.db.DB.Order("agent_id, conversation_id").Find(&wms).Error; err != nil {
		h.t.Fatal(err)
	}
	var n int64
	h.db.DB.Model(&store.AppliedEffect{}).Count(&n)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%d %s v%d del=%d %q\n", f.AgentID, f.Filename, f.Version, f.Deleted, f.Content)
	}
	for _, w := range wms {
		if withWatermarks || w.LastMessageID != 0 {
			fmt.Fprintf(&b, "wm %d %s %d\n", w.AgentID, w.ConversationID, w.LastMessageID)
		}
	}
	fmt.Fprintf(&b, "effects %d\n", n)
	return b.String()
}

// httpServer serves the pipeline routes (no API keys: open loopback mode).
func (h *harness) httpServer(keys ...config.APIKey) *httptest.Server {
	h.t.Helper()
	s := httpapi.New(httpapi.NewAuthenticator(keys), prometheus.NewRegistry(), quietLog())
	// The API's own lease manager, as an API process binds it: it only reads.
	leases, err := lease.Bucket(context.Background(), h.js, bus.BucketLease, h.set.LeaseTTL, 1, "api")
	if err != nil {
		h.t.Fatal(err)
	}
	registerRoutes(s, API{Publisher: h.pub, Ledger: h.ledger, JS: h.js, NC: h.nc, ManualTimeout: h.set.ManualTimeout, Metrics: h.metrics,
		Pending: NewPendingReader(leases, conversation.New(h.db.DB), h.set.SweepEvery), DB: h.db.DB}, h.js)
	if _, bench := h.t.(*testing.B); bench {
		// Benchmarks measure the server, not the test's document validator (which costs
		// about 1 ms a request).
		srv := httptest.NewServer(s)
		h.t.Cleanup(srv.Close)
		return srv
	}
	return apitest.Serve(h.t, s) // every response is held against the OpenAPI document
}

// Prompt helpers for fake LLM scripts.

func userPrompt(r llmtest.Received) string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

func section(p, tag string) string {
	_, rest, ok := strings.Cut(p, "<"+tag+">\n")
	if !ok {
		return ""
	}
	body, _, _ := strings.Cut(rest, "\n</"+tag+">")
	return body
}

var tagRE = regexp.MustCompile(`\b(t[0-9]+-[0-9]+)\b`)

// tags lists the distinct conversation tags (t<agent>-<n>) in the transcript.
func tags(p string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range tagRE.FindAllString(section(p, "transcript"), -1) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func answer(x map[string]any) llmtest.Reply {
	b, _ := json.Marshal(x)
	return llmtest.Reply{Content: string(b)}
}

// echoLLM answers with a daily entry naming every tag of the transcript and leaves
// PROFILE.md and MEMORY.md alone.
func echoLLM(r llmtest.Received) llmtest.Reply {
	var lines []string
	for _, tg := range tags(userPrompt(r)) {
		lines = append(lines, "- covered "+tg)
	}
	return answer(map[string]any{"should_update": true, "reason": "test", "daily_entry": strings.Join(lines, "\n"),
		"memory_update": "", "profile_update": ""})
}
