package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// The binaries are built once per test run, into a directory removed by TestMain.
var bins struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// binaries builds cmd/api, cmd/summarizer, cmd/emergence and cmd/scheduler (once) and
// returns the directory holding them.
func binaries(t testing.TB) string {
	t.Helper()
	bins.once.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
		if err != nil {
			bins.err = err
			return
		}
		dir, err := os.MkdirTemp("", "matememory-bin-")
		if err != nil {
			bins.err = err
			return
		}
		bins.dir = dir
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			"./cmd/api", "./cmd/summarizer", "./cmd/emergence", "./cmd/scheduler")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("go build the binaries: %v\n%s", err, out)
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.dir
}

// database is where the processes keep their state.
type database struct {
	Name, Driver, DSN string
}

// forDB runs fn as a subtest against MariaDB when MATE_TEST_MYSQL_DSN is set (a fresh
// database, as storetest makes it), and otherwise against one SQLite file (WAL) shared by
// every process. One database, not both: each run starts a cluster and several processes.
func forDB(t *testing.T, fn func(t *testing.T, db database)) {
	name := "sqlite"
	if storetest.MySQLDSN(t) != "" {
		name = "mysql"
	}
	t.Run(name, func(t *testing.T) {
		if name == "mysql" {
			my, ok := storetest.MySQL(t)
			if !ok {
				t.Fatal("MATE_TEST_MYSQL_DSN disappeared")
			}
			fn(t, database{Name: "mysql", Driver: "mysql", DSN: my.DSN})
			return
		}
		lite := storetest.SQLite(t)
		fn(t, database{Name: "sqlite", Driver: "sqlite", DSN: lite.DSN})
	})
}

// env is one cluster test's world: a three-node JetStream cluster, a database, a fake LLM
// and the processes started against them.
type env struct {
	t     testing.TB
	nats  *bustest.Cluster
	db    database
	llm   *fakeLLM
	bin   string
	vars  []string
	logs  string
	mu    sync.Mutex
	procs []*proc
}

// newEnv starts the cluster and the fake LLM; extra are environment settings (KEY=value)
// every process gets on top of the common ones.
func newEnv(t testing.TB, db database, llm *fakeLLM, extra ...string) *env {
	t.Helper()
	bin := binaries(t)
	e := &env{t: t, db: db, llm: llm, bin: bin, logs: t.TempDir()}
	if dir := os.Getenv("MATE_CLUSTER_LOGS"); dir != "" {
		// Keep the processes' logs for a look after the run.
		e.logs = filepath.Join(dir, strings.NewReplacer("/", "_").Replace(t.Name()))
		if err := os.MkdirAll(e.logs, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.nats = bustest.StartCluster(t, 3)
	e.vars = []string{
		"MATE_NATS_URL=" + e.nats.URL(),
		"MATE_NATS_REPLICAS=3",
		"MATE_DATABASE_DRIVER=" + db.Driver,
		"MATE_DATABASE_DSN=" + db.DSN,
		"MATE_HTTP_ADDR=127.0.0.1:0",
		"MATE_TIMEZONE=UTC",
		"MATE_LANGUAGE=en",
		// A killed worker's deliveries come back after AckWait, its leases after their TTL:
		// short ones keep the tests short (in-progress acks keep live work alive).
		"MATE_NATS_ACK_WAIT_SECONDS=6",
		"MATE_MEMORY_LEASE_TTL_SECONDS=5",
		"MATE_LLM_MODEL=fake-model",
		"MATE_LLM_TIMEOUT_SECONDS=30",
		"OPENAI_API_KEY=test-key",
	}
	e.vars = append(e.vars, extra...)
	t.Cleanup(e.stopAll)
	return e
}

// proc is one running binary.
type proc struct {
	name string
	cmd  *exec.Cmd
	// Addr is the HTTP address it printed in its banner.
	Addr    string
	logPath string
	done    chan struct{}
	exit    error
	lines   atomic.Int64
}

// start runs binary (api, summarizer, emergence, scheduler) as name and waits until its
// /readyz answers 200.
func (e *env) start(binary, name string, extra ...string) *proc {
	e.t.Helper()
	p := &proc{name: name, done: make(chan struct{}), logPath: filepath.Join(e.logs, name+".log")}
	logf, err := os.Create(p.logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	work := e.t.TempDir()
	cmd := exec.Command(filepath.Join(e.bin, binary))
	cmd.Dir = work
	// Only our settings: nothing of the developer's MATE_* or OPENAI_* environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MATE_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, e.vars...)
	cmd.Env = append(cmd.Env, "MATE_DATA_DIR="+filepath.Join(work, "data"), "OPENAI_BASE_URL="+e.llm.baseURL(name))
	cmd.Env = append(cmd.Env, extra...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	p.cmd = cmd
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.lines.Add(1)
			if a, ok := strings.CutPrefix(line, "MateMemory ("); ok {
				if _, u, ok := strings.Cut(a, "listening on http://"); ok {
					select {
					case addr <- strings.TrimSpace(u):
					default:
					}
				}
			}
		}
		p.exit = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	deadline := time.After(90 * time.Second)
	select {
	case p.Addr = <-addr:
	case <-p.done:
		e.t.Fatalf("%s exited at start-up (%v):\n%s", name, p.exit, p.tail(40))
	case <-deadline:
		e.t.Fatalf("%s printed no banner within 90 s:\n%s", name, p.tail(40))
	}
	poll.UntilReason(e.t, 60*time.Second, name+" ready", func() (bool, string) {
		st, body := httpGet("http://" + p.Addr + "/readyz")
		return st == 200, fmt.Sprintf("/readyz %d %s", st, body)
	}, poll.Every(100*time.Millisecond))
	return p
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	raw, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (p *proc) log() string {
	raw, _ := os.ReadFile(p.logPath)
	return string(raw)
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s survived SIGKILL", p.name)
	}
}

// terminate sends SIGTERM and requires a clean exit (status 0, "stopped" logged) within
// limit.
func (p *proc) terminate(t testing.TB, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(limit):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		t.Fatalf("%s did not stop within %s of SIGTERM:\n%s", p.name, limit, p.tail(30))
	}
	took := time.Since(start)
	if p.exit != nil {
		t.Errorf("%s exited with %v after SIGTERM:\n%s", p.name, p.exit, p.tail(30))
	}
	log := p.log()
	if !strings.Contains(log, "shutting down: finishing in-flight work") || !strings.Contains(log, "msg=stopped") {
		t.Errorf("%s: no orderly shutdown in its log:\n%s", p.name, p.tail(30))
	}
	return took
}

// stopAll ends the processes still running (SIGTERM, then SIGKILL) and, when the test
// failed, prints the end of every log.
func (e *env) stopAll() {
	e.mu.Lock()
	procs := append([]*proc(nil), e.procs...)
	e.mu.Unlock()
	for _, p := range procs {
		if p.running() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	if e.t.Failed() {
		for _, p := range procs {
			e.t.Logf("==== %s (exit %v), last lines:\n%s", p.name, p.exit, p.tail(25))
		}
	}
}

// client is a typed REST client of an API process.
func (e *env) client(p *proc) *client.Client {
	c, err := client.New("http://"+p.Addr, "", client.WithTimeout(20*time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// js connects the test itself to the cluster.
func (e *env) js() jetstream.JetStream {
	e.t.Helper()
	nc, err := nats.Connect(e.nats.URL(), nats.MaxReconnects(-1))
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

func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// metric reads one sample of a Prometheus text exposition (name with its labels exactly as
// exposed, e.g. `matememory_scheduler_leader`); missing is 0.
func metric(addr, name string) float64 {
	_, body := httpGet("http://" + addr + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// ---- the fake LLM ----

// marker tags a conversation: agent and conversation number. The fake LLM reads the
// markers of a transcript to attribute the call to its agent and echoes them into the
// daily entry, so the daily notes show which conversations each extraction covered.
var marker = regexp.MustCompile(`\bct-(\d+)-(\d+)\b`)

func markerOf(agent int64, conv int) string { return fmt.Sprintf("ct-%d-%d", agent, conv) }

// fakeLLM is llmtest's chat-completions server behind a front that attributes each call
// to the process that made it (every process gets its own base URL, /p/<name>/v1/) and to
// its agent (the markers of its transcript), serves the model's latency, and records
// per-agent concurrency: two extractions of one agent must never overlap.
type fakeLLM struct {
	srv   *llmtest.Server
	front *httptest.Server
	delay time.Duration

	mu        sync.Mutex
	perAgent  map[int64]int
	overlaps  []string
	mixed     []string
	byProc    map[string]int // calls in flight per process
	doneCalls atomic.Int64
	extracts  atomic.Int64
	// attributed counts the extractions attributed to an agent (the overlap check would
	// be vacuous without them).
	attributed atomic.Int64
}

func newFakeLLM(t testing.TB, delay time.Duration) *fakeLLM {
	f := &fakeLLM{delay: delay, perAgent: map[int64]int{}, byProc: map[string]int{}}
	f.srv = llmtest.New(t, f.answer)
	inner := f.srv.Server.Config.Handler
	f.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/p/")
		name, path, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.byProc[name]++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.byProc[name]--
			f.mu.Unlock()
		}()
		// An extraction is in flight for its agent from the call until the answer, or until
		// the caller gives up (a worker stopping cancels its call and writes nothing after).
		transcript := transcriptOf(body)
		isExtract := transcript != ""
		if m := marker.FindStringSubmatch(transcript); m != nil {
			f.attributed.Add(1)
			agent, _ := strconv.ParseInt(m[1], 10, 64)
			f.mu.Lock()
			f.perAgent[agent]++
			if f.perAgent[agent] > 1 {
				f.overlaps = append(f.overlaps, fmt.Sprintf("agent %d: %d extractions at once", agent, f.perAgent[agent]))
			}
			f.mu.Unlock()
			defer func() {
				f.mu.Lock()
				f.perAgent[agent]--
				f.mu.Unlock()
			}()
		}
		if isExtract {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + path
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		inner.ServeHTTP(w, r2)
	}))
	t.Cleanup(f.front.Close)
	return f
}

// transcriptOf is the transcript of a summarize prompt in a chat-completions request body,
// or "".
func transcriptOf(body []byte) string {
	var req struct {
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for _, m := range req.Messages {
		if c, ok := m.Content.(string); ok {
			if _, t, ok := strings.Cut(c, "<transcript>"); ok {
				t, _, _ = strings.Cut(t, "</transcript>")
				return t
			}
		}
	}
	return ""
}

func (f *fakeLLM) baseURL(proc string) string { return f.front.URL + "/p/" + proc + "/v1/" }

// inFlight is the number of calls process proc has open.
func (f *fakeLLM) inFlight(proc string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byProc[proc]
}

// answer handles one call: a summarize prompt gets a daily entry naming every marker of
// its transcript; anything else (emergence) declines to update.
func (f *fakeLLM) answer(r llmtest.Received) llmtest.Reply {
	defer f.doneCalls.Add(1)
	transcript, ok := r.Transcript()
	if !ok {
		return reply(map[string]any{"should_update": false, "reason": "nothing recurring", "memory_content": ""})
	}
	f.extracts.Add(1)
	var lines []string
	seen := map[string]bool{}
	agents := map[int64]bool{}
	for _, m := range marker.FindAllStringSubmatch(transcript, -1) {
		a, _ := strconv.ParseInt(m[1], 10, 64)
		agents[a] = true
		if !seen[m[0]] {
			seen[m[0]] = true
			lines = append(lines, "- "+m[0])
		}
	}
	if len(agents) > 1 {
		f.mu.Lock()
		f.mixed = append(f.mixed, fmt.Sprint(agents))
		f.mu.Unlock()
	}
	return reply(map[string]any{"should_update": true, "reason": "test", "daily_entry": strings.Join(lines, "\n"),
		"memory_update": "", "profile_update": ""})
}

func reply(v map[string]any) llmtest.Reply {
	b, _ := json.Marshal(v)
	return llmtest.Reply{Content: string(b)}
}

// checkNoOverlap fails when two extractions of one agent overlapped or one transcript held
// two agents' conversations.
func (f *fakeLLM) checkNoOverlap(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.overlaps) > 0 {
		t.Errorf("extractions of one agent overlapped (%d times): %v", len(f.overlaps), f.overlaps)
	}
	if len(f.mixed) > 0 {
		t.Errorf("a transcript held several agents' conversations: %v", f.mixed)
	}
	if f.attributed.Load() == 0 || f.attributed.Load() < f.extracts.Load() {
		t.Errorf("only %d of %d extractions attributed to an agent", f.attributed.Load(), f.extracts.Load())
	}
}

// ---- events ----

// conversationEvent is agent's conversation conv, completed, with its messages inline (the
// worker stores them once per event), so a publish retried after a transport error never
// stores them twice.
func conversationEvent(agent int64, conv int) *event.ConversationCompletedEvent {
	mk := markerOf(agent, conv)
	msgs := []event.Message{
		{Role: "user", Content: mk + ": I want to plan a trip to the mountains next month."},
		{Role: "assistant", Content: "Sounds great. Which mountains do you have in mind?"},
		{Role: "user", Content: "Somewhere with lakes, and I prefer quiet places."},
		{Role: "assistant", Content: "Then the Dolomites in early autumn would suit you."},
	}
	return &event.ConversationCompletedEvent{
		EventID: "evt-" + mk, AgentID: agent, ConversationID: fmt.Sprintf("conv-%d", conv),
		UserMessage: msgs[2].Content, AssistantReply: msgs[3].Content, MessageCount: len(msgs),
		TriggerSource: "web", Messages: msgs,
	}
}

// publishRetrying posts e through the API as a chat service would: retrying on 503 and
// transport errors with the same event id, until stored or ctx ends. It reports whether the
// API accepted it (2xx).
func publishRetrying(ctx context.Context, c *client.Client, e *event.ConversationCompletedEvent) (bool, int, error) {
	tries := 0
	for {
		tries++
		_, err := c.PublishCompletion(ctx, e)
		if err == nil {
			return true, tries, nil
		}
		if !client.IsRetryable(err) || ctx.Err() != nil {
			return false, tries, err
		}
		select {
		case <-ctx.Done():
			return false, tries, err
		case <-time.After(200 * time.Millisecond): // a chat service's retry back-off
		}
	}
}

// published is what a test sent and the API accepted.
type published struct {
	mu       sync.Mutex
	accepted map[string]*event.ConversationCompletedEvent // by marker
	retried  int
	refused  []string
}

func (p *published) add(e *event.ConversationCompletedEvent, ok bool, tries int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accepted == nil {
		p.accepted = map[string]*event.ConversationCompletedEvent{}
	}
	if tries > 1 {
		p.retried++
	}
	if ok {
		p.accepted[marker.FindString(e.Messages[0].Content)] = e
	} else {
		p.refused = append(p.refused, fmt.Sprintf("%s: %v", e.EventID, err))
	}
}

// dailyMarkers counts the markers in agent's daily notes.
func dailyMarkers(ctx context.Context, c *client.Client, agent int64) (map[string]int, error) {
	files, err := c.ListFiles(ctx, agent, "memory/")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range files {
		file, err := c.ReadFile(ctx, agent, f.Filename)
		if err != nil {
			return nil, err
		}
		for _, m := range marker.FindAllString(file.Content, -1) {
			out[m]++
		}
	}
	return out, nil
}

// checkProcessed waits until every accepted event's marker is in its agent's daily notes
// and then checks, from the notes and the run ledger, that each was processed exactly once
// in effect: its marker appears once, no two runs appended its conversation, and its event
// has a completed run. It fails at once on a marker seen twice. It returns how many
// conversations no run recorded appending (interrupted appends completed by recovery).
func checkProcessed(t testing.TB, c *client.Client, pub *published, timeout time.Duration) (unrecorded int) {
	t.Helper()
	ctx := context.Background()
	byAgent := map[int64][]*event.ConversationCompletedEvent{}
	for _, e := range pub.accepted {
		byAgent[e.AgentID] = append(byAgent[e.AgentID], e)
	}
	agents := make([]int64, 0, len(byAgent))
	for a := range byAgent {
		agents = append(agents, a)
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i] < agents[j] })
	done := map[int64]bool{}
	poll.UntilReason(t, timeout, "every accepted event in the daily notes", func() (bool, string) {
		missing := 0
		for _, a := range agents {
			if done[a] {
				continue
			}
			got, err := dailyMarkers(ctx, c, a)
			if err != nil {
				return false, err.Error()
			}
			complete := true
			for mk, n := range got {
				if n > 1 {
					t.Fatalf("agent %d: %s is %d times in the daily notes", a, mk, n)
				}
			}
			for _, e := range byAgent[a] {
				if got[marker.FindString(e.Messages[0].Content)] != 1 {
					complete = false
					missing++
				}
			}
			done[a] = complete
		}
		return missing == 0, fmt.Sprintf("%d accepted events not yet in the daily notes", missing)
	}, poll.Every(100*time.Millisecond))
	// The ledger: each event has a completed run (an extraction, or "covered by an earlier
	// extraction"); each conversation was appended by exactly one run.
	for _, a := range agents {
		var runs []client.Run
		poll.UntilReason(t, 30*time.Second, fmt.Sprintf("agent %d's runs recorded", a), func() (bool, string) {
			var err error
			runs, err = c.Runs(ctx, a, client.RunFilter{Kind: "summarize", Limit: 1000})
			if err != nil {
				return false, err.Error()
			}
			completed := map[string]bool{}
			for _, r := range runs {
				if r.Status == "completed" {
					completed[r.EventID] = true
				}
			}
			for _, e := range byAgent[a] {
				if !completed[e.EventID] {
					// What the ledger holds for the agent, to tell a late run from a lost one.
					var b strings.Builder
					for _, r := range runs {
						fmt.Fprintf(&b, "\n  %s %s %s attempt %d %s: %.160s", r.CreateTime.Format("15:04:05.000"), r.EventID, r.Status, r.Attempt, r.Conversations, r.Reason)
					}
					return false, e.EventID + " has no completed run; the agent's runs:" + b.String()
				}
			}
			return true, ""
		}, poll.Every(100*time.Millisecond))
		appended := map[string]int{}
		for _, r := range runs {
			if !changedDaily(r) {
				continue
			}
			for _, conv := range r.Conversations {
				appended[conv]++
			}
		}
		for _, e := range byAgent[a] {
			// A worker killed between its append and its ledger row leaves no run naming
			// the append (the next worker completes it from the intent): at most one.
			n := appended[e.ConversationID]
			if n == 0 {
				unrecorded++
			}
			if n > 1 {
				var b strings.Builder
				for _, r := range runs {
					fmt.Fprintf(&b, "\n  %s %s %s %v files %v: %s", r.CreateTime.Format("15:04:05.000"), r.EventID, r.Status, r.Conversations, r.FilesChanged, r.Reason)
				}
				t.Errorf("agent %d %s: appended to the daily note by %d runs, want at most 1; runs:%s", a, e.ConversationID, n, b.String())
			}
		}
	}
	if unrecorded > 0 {
		t.Logf("%d conversations appended by a run that left no ledger row (an interrupted worker's, completed from its intent)", unrecorded)
	}
	return unrecorded
}

func changedDaily(r client.Run) bool {
	for _, f := range r.FilesChanged {
		if strings.HasPrefix(f, "memory/") {
			return true
		}
	}
	return false
}

// deadLetters counts the messages on MATE_DLQ.
func deadLetters(t testing.TB, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "MATE_DLQ")
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// streamReplicas checks every stream and KV bucket runs at R3.
func checkReplicas(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := js.StreamNames(ctx)
	n := 0
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replicas, want 3", name, r)
		}
		n++
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no streams")
	}
}
