package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// previousRelease is the commit the rolling-upgrade test runs beside this tree: the last one
// before the redesign of issue 24. Move it forward when a release's formats become the
// oldest an operator may still run beside the next one (docs/operations.md, "Upgrade with a
// rolling update").
const previousRelease = "fef2fe24c5d968a1f1c5539d14654bcaca439b0c"

// The previous release's binaries are built once per test run, into a directory removed
// when the test that built them ends (t.Cleanup of the first caller).
var oldBins struct {
	once sync.Once
	dir  string
	skip string
	err  error
}

// oldBinaries builds cmd/api, cmd/summarizer and cmd/emergence of previousRelease from the
// repository's history (git archive, same module cache) and returns their directory. When
// the commit is not in the clone (a shallow one) it fetches it from the clone's origin
// (ensureCommit); when that fails too it skips the test, except under CI=true, where the
// test fails: CI must not pass without the rolling upgrade having run.
func oldBinaries(t *testing.T) string {
	t.Helper()
	oldBins.once.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
		if err != nil {
			oldBins.err = err
			return
		}
		if err := ensureCommit(t, root, previousRelease); err != nil {
			oldBins.skip = fmt.Sprintf("commit %s (the release before the redesign) is not in this clone and could not be fetched: %v; "+
				"the rolling-upgrade test needs the full history (git fetch --unshallow)", previousRelease, err)
			return
		}
		dir, err := os.MkdirTemp("", "matememory-old-")
		if err != nil {
			oldBins.err = err
			return
		}
		oldBins.dir = dir
		src := filepath.Join(dir, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			oldBins.err = err
			return
		}
		// git archive | tar -x: a plain tree, no worktree to prune afterwards.
		archive := exec.Command("git", "-C", root, "archive", "--format=tar", previousRelease)
		untar := exec.Command("tar", "-x", "-C", src)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			oldBins.err = err
			return
		}
		untar.Stdin = pipe
		var aerr, terr strings.Builder
		archive.Stderr, untar.Stderr = &aerr, &terr
		if err := untar.Start(); err != nil {
			oldBins.err = fmt.Errorf("tar: %v", err)
			return
		}
		if err := archive.Run(); err != nil {
			oldBins.err = fmt.Errorf("git archive %s: %v %s", previousRelease, err, aerr.String())
			_ = untar.Wait()
			return
		}
		if err := untar.Wait(); err != nil {
			oldBins.err = fmt.Errorf("tar -x: %v %s", err, terr.String())
			return
		}
		// Not -trimpath: the dependencies' compiled packages are then the new build's, from
		// the build cache; only MateMemory's own packages compile again.
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+string(filepath.Separator),
			"./cmd/api", "./cmd/summarizer", "./cmd/emergence")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			oldBins.err = fmt.Errorf("go build %s's binaries: %v\n%s", previousRelease, err, out)
			return
		}
		t.Logf("built %s's binaries in %s", previousRelease, time.Since(start).Round(time.Second))
		_ = os.RemoveAll(src)
	})
	if oldBins.skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(oldBins.skip)
		}
		t.Skip(oldBins.skip)
	}
	if oldBins.err != nil {
		t.Fatal(oldBins.err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(oldBins.dir) })
	return filepath.Join(oldBins.dir, "bin")
}

// ensureCommit makes sure commit is in the clone at root: a shallow clone (CI's may be one)
// is deepened from its origin (git fetch --unshallow), and a full clone without it (a
// single-branch one) fetches the commit itself.
func ensureCommit(t *testing.T, root, commit string) error {
	t.Helper()
	has := func() error {
		out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput()
		if err != nil {
			return fmt.Errorf("git cat-file: %v %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if has() == nil {
		return nil
	}
	fetch := []string{"fetch", "--quiet", "origin", commit}
	if out, _ := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(out)) == "true" {
		fetch = []string{"fetch", "--quiet", "--unshallow", "origin"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", append([]string{"-C", root}, fetch...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %v %s", strings.Join(fetch, " "), err, strings.TrimSpace(string(out)))
	}
	t.Logf("fetched %s into the clone (git %s)", commit, strings.Join(fetch, " "))
	return has()
}

// startOld runs binary of the directory old (oldBinaries) as name, like start.
func (e *env) startOld(old, binary, name string, extra ...string) *proc {
	e.t.Helper()
	cur := e.bin
	e.bin = old
	defer func() { e.bin = cur }()
	return e.start(binary, name, extra...)
}

// emptyMySQL creates a fresh, empty MariaDB database (dropped at the end): the previous
// release creates its schema, the new binary migrates it forward, as in an upgrade.
func emptyMySQL(t *testing.T) database {
	t.Helper()
	dsn := storetest.MySQLDSN(t)
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("MATE_TEST_MYSQL_DSN: %v", err)
	}
	admin, err := store.Open("mysql", dsn, "")
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	name := fmt.Sprintf("mate_up_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci").Error; err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP DATABASE IF EXISTS " + name)
		_ = store.Close(admin)
	})
	cfg.DBName = name
	return database{Name: "mysql", Driver: "mysql", DSN: cfg.FormatDSN()}
}

// rollingLoad publishes agents' conversations continuously, round-robin over the APIs up at
// the moment (a load balancer's view): a publish that fails for a transport error or a 503
// is retried, with the same event id, on the next API.
type rollingLoad struct {
	agents int
	pub    published
	count  atomic.Int64
	next   atomic.Int64

	mu   sync.Mutex
	apis []*client.Client
}

func (l *rollingLoad) setAPIs(cs ...*client.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.apis = cs
}

func (l *rollingLoad) api(i int) *client.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.apis[i%len(l.apis)]
}

// run publishes from publishers goroutines, each pausing pace between events, until stop is
// closed; it returns when the last publish is done.
func (l *rollingLoad) run(stop <-chan struct{}, publishers int, pace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := int(l.next.Add(1) - 1)
				e := conversationEvent(int64(k%l.agents+1), k/l.agents+1)
				ok, tries, err := l.publish(ctx, k, e)
				l.pub.add(e, ok, tries, err)
				l.count.Add(1)
				time.Sleep(pace) // the chat traffic's pace, not a wait for an outcome
			}
		}()
	}
	wg.Wait()
}

func (l *rollingLoad) publish(ctx context.Context, k int, e *event.ConversationCompletedEvent) (bool, int, error) {
	for tries := 1; ; tries++ {
		_, err := l.api(k+tries).PublishCompletion(ctx, e)
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

// metricSum adds the samples whose line starts with prefix (a metric's name and the start
// of its labels: `name{label="value"`).
func metricSum(addr, prefix string) float64 {
	_, body := httpGet("http://" + addr + "/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i >= 0 {
			f, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += f
		}
	}
	return sum
}

// manualCall is a manual summarize or emergence request and its outcome.
type manualCall struct {
	what string
	out  *client.RunOutcome
	err  error
}

// TestRollingUpgradeOldBesideNew runs the previous release (previousRelease, built from the
// repository's history) and this tree side by side on one R3 cluster and one MariaDB
// database, as a rolling update does, under a continuous load of completions published
// through both versions' APIs. The old release starts alone and creates the schema; the new
// API (which migrates it forward), summarizers and emergence worker join; an old and a new
// summarizer are SIGKILLed in an LLM call; manual summarize and emergence requests go through
// both APIs to whichever worker takes them; then the old processes go (the API SIGKILLed
// with publishes in flight, retried on the new one). Every accepted event
// reaches its agent's daily note exactly once with one appending run and a completed run
// (checkProcessed), no two extractions of an agent overlap across versions (the lease record
// is shared), nothing is dead-lettered, and both versions' summarizers did extractions.
func TestRollingUpgradeOldBesideNew(t *testing.T) {
	t.Parallel()
	if storetest.MySQLDSN(t) == "" {
		t.Skip("MATE_TEST_MYSQL_DSN is not set: the two versions' processes share one MariaDB database")
	}
	old := oldBinaries(t)
	takePipelineSlot(t)
	db := emptyMySQL(t)
	llm := newFakeLLM(t, 200*time.Millisecond)
	// A transcript long enough for everything an agent gets meanwhile: a conversation split
	// over two extractions would be appended by two runs, which checkProcessed counts.
	e := newEnv(t, db, llm, "MATE_MEMORY_COOLDOWN_MINUTES=0.02", "MATE_MEMORY_MAX_TRANSCRIPT_MESSAGES=400")
	js := e.js()

	// Before the upgrade: the previous release alone.
	apiOld := e.startOld(old, "api", "api-old")
	sumOld1 := e.startOld(old, "summarizer", "summarizer-old-1")
	sumOld2 := e.startOld(old, "summarizer", "summarizer-old-2")
	emOld := e.startOld(old, "emergence", "emergence-old")
	cOld := e.client(apiOld)

	load := &rollingLoad{agents: 12}
	load.setAPIs(cOld)
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		load.run(stop, 4, 100*time.Millisecond)
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loaded
	}()
	at := func(n int64) {
		t.Helper()
		poll.UntilReason(t, 90*time.Second, fmt.Sprintf("%d events published", n), func() (bool, string) {
			return load.count.Load() >= n, fmt.Sprint(load.count.Load())
		}, poll.Every(100*time.Millisecond))
	}
	inCall := func(p *proc) {
		t.Helper()
		poll.UntilReason(t, 60*time.Second, p.name+" in an LLM call", func() (bool, string) {
			return llm.inFlight(p.name) > 0, fmt.Sprintf("%d calls done", llm.doneCalls.Load())
		}, poll.Every(100*time.Millisecond))
	}
	extractions := map[string]float64{}
	completed := func(p *proc) {
		extractions[p.name] = metricSum(p.Addr, `matememory_summarizer_outcomes_total{status="completed"`)
	}

	// The rolling update: the new API beside the old one (the load balancer sends to both),
	// then the new workers, one at a time, while the old ones go.
	at(40)
	apiNew := e.start("api", "api-new")
	cNew := e.client(apiNew)
	load.setAPIs(cOld, cNew)
	sumNew1 := e.start("summarizer", "summarizer-new-1")
	inCall(sumOld1)
	completed(sumOld1)
	sumOld1.kill(t)
	t.Logf("killed summarizer-old-1 in an LLM call after %d events", load.count.Load())
	sumNew2 := e.start("summarizer", "summarizer-new-2")
	emNew := e.start("emergence", "emergence-new")

	// Manual requests through both APIs, answered by whichever version's worker takes them:
	// the summarize request, the emergence trigger and their answers cross versions.
	at(120)
	// Clients that wait as long as the calls may (a loaded cluster answers in seconds; the
	// harness's clients give up after 20 s).
	waiting := func(p *proc) *client.Client {
		c, err := client.New("http://"+p.Addr, "", client.WithTimeout(100*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var manual []manualCall
	var mmu sync.Mutex
	var mwg sync.WaitGroup
	mOld, mNew := waiting(apiOld), waiting(apiNew)
	for i, c := range []*client.Client{mOld, mNew, mOld, mNew} {
		api := []string{"old", "new"}[i%2]
		mwg.Add(2)
		go func() {
			defer mwg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			agent := int64(i + 1)
			out, err := c.Summarize(ctx, agent, "conv-2")
			mmu.Lock()
			manual = append(manual, manualCall{fmt.Sprintf("summarize agent %d conv-2 via the %s API", agent, api), out, err})
			mmu.Unlock()
		}()
		go func() {
			defer mwg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			agent := int64(i + 5)
			out, err := c.Emergence(ctx, agent)
			mmu.Lock()
			manual = append(manual, manualCall{fmt.Sprintf("emergence agent %d via the %s API", agent, api), out, err})
			mmu.Unlock()
		}()
	}

	inCall(sumNew1)
	completed(sumNew1)
	sumNew1.kill(t)
	t.Logf("killed summarizer-new-1 in an LLM call after %d events", load.count.Load())
	sumNew3 := e.start("summarizer", "summarizer-new-3")
	mwg.Wait()

	// The old release goes: its last summarizer hands its work back (SIGTERM), its emergence
	// worker and its API are killed, the API with publishes in flight: their retries go to
	// the new API with the same event ids.
	at(load.count.Load() + 40)
	completed(sumOld2)
	sumOld2.terminate(t, 30*time.Second)
	emOld.kill(t)
	apiOld.kill(t)
	time.Sleep(100 * time.Millisecond) // publishes meet the dead API before the balancer notices
	load.setAPIs(cNew)
	at(load.count.Load() + 40)
	close(stop)
	<-loaded

	if len(load.pub.refused) > 0 {
		t.Errorf("%d events never accepted: %v", len(load.pub.refused), load.pub.refused)
	}
	t.Logf("%d events accepted, %d of them after a retry", len(load.pub.accepted), load.pub.retried)
	checkProcessed(t, cNew, &load.pub, 3*time.Minute)
	llm.checkNoOverlap(t)
	if n := deadLetters(t, js); n != 0 {
		t.Errorf("%d dead letters", n)
	}

	// Each manual request got an answer and, once the workers settled, one run in the ledger.
	ctx := context.Background()
	for _, m := range manual {
		if m.err != nil {
			t.Errorf("%s: %v", m.what, m.err)
			continue
		}
		if m.out.Status == "failed" {
			t.Errorf("%s: %+v", m.what, *m.out)
		}
		if m.out.RequestID == "" || !strings.HasPrefix(m.what, "emergence") {
			// A manual summarize's effect is in the notes and runs checkProcessed read.
			continue
		}
		var agent int64
		fmt.Sscanf(m.what, "emergence agent %d", &agent)
		poll.UntilReason(t, 30*time.Second, m.what+": one run", func() (bool, string) {
			runs, err := cNew.Runs(ctx, agent, client.RunFilter{Kind: "emergence", EventID: m.out.RequestID})
			if err != nil {
				return false, err.Error()
			}
			final := 0
			for _, r := range runs {
				if r.Final() {
					final++
				}
			}
			if final > 1 {
				t.Fatalf("%s: %d final runs, want 1: %+v", m.what, final, runs)
			}
			return final == 1, fmt.Sprintf("%d final runs of %d", final, len(runs))
		}, poll.Every(100*time.Millisecond))
	}

	// Both versions did extractions beside each other.
	completed(sumNew2)
	completed(sumNew3)
	t.Logf("completed extractions per summarizer: %v; %d LLM extractions for %d events", extractions, llm.extracts.Load(), len(load.pub.accepted))
	if extractions["summarizer-old-1"]+extractions["summarizer-old-2"] == 0 {
		t.Error("the old summarizers completed no extraction")
	}
	if extractions["summarizer-new-1"]+extractions["summarizer-new-2"]+extractions["summarizer-new-3"] == 0 {
		t.Error("the new summarizers completed no extraction")
	}
	for _, p := range []*proc{sumNew2, sumNew3, emNew, apiNew} {
		p.terminate(t, 30*time.Second)
	}
}
