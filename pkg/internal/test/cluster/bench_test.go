package cluster

// Benchmarks of summarizer worker processes on the three-node cluster. Each iteration runs
// a fixed workload and reports its own figures (b.ReportMetric), so -benchtime=1x is
// enough:
//
//	go test ./pkg/internal/test/cluster -run '^$' -bench . -benchtime=1x -timeout 60m
//	MATE_BENCH_REPLICAS=3 go test ./pkg/internal/test/cluster -run '^$' -bench Summarizers -benchtime=1x
//	MATE_BENCH_DRAIN_PROCS=4,8 go test ./pkg/internal/test/cluster -run '^$' -bench Drain -benchtime=1x
//
// Figures, machine and exact commands: docs/benchmarks.md.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/summarizer"
)

// benchLLMDelay is the fake model's latency: 5 calls per second per slot.
const benchLLMDelay = 200 * time.Millisecond

// benchDB is MariaDB when MATE_TEST_MYSQL_DSN is set (a fresh database), else one SQLite file.
func benchDB(b *testing.B) database {
	if my, ok := storetest.MySQL(b); ok {
		return database{Name: "mysql", Driver: "mysql", DSN: my.DSN}
	}
	lite := storetest.SQLite(b)
	return database{Name: "sqlite", Driver: "sqlite", DSN: lite.DSN}
}

// perProcess is a summarizer process's concurrency (deliveries in flight), as the binaries
// configure it.
func perProcess() int { return summarizer.SettingsFrom(config.Default()).Concurrency }

// benchEnv is a cluster with n summarizer processes (no cooldown: every event is its own
// extraction, so the LLM calls needed are known) and a publisher straight onto JetStream.
type benchEnv struct {
	*env
	pub *eventpub.Publisher
	js  jetstream.JetStream
	db  database
}

func newBenchEnv(b *testing.B, procs, replicas int) *benchEnv {
	db := benchDB(b)
	llm := newFakeLLM(b, benchLLMDelay)
	e := newEnv(b, db, llm, "MATE_MEMORY_COOLDOWN_MINUTES=0",
		"MATE_NATS_ACK_WAIT_SECONDS=60", "MATE_MEMORY_LEASE_TTL_SECONDS=30", fmt.Sprintf("MATE_NATS_REPLICAS=%d", replicas))
	for i := 1; i <= procs; i++ {
		e.start("summarizer", fmt.Sprintf("summarizer-%d", i))
	}
	nc, err := nats.Connect(e.nats.URL(), nats.MaxReconnects(-1))
	if err != nil {
		b.Fatal(err)
	}
	pub, err := eventpub.NewPublisher(nc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pub.Close)
	return &benchEnv{env: e, pub: pub, js: e.js(), db: db}
}

// publish stores events on MATE_EVENTS from 32 publishers and returns the time it took.
func (be *benchEnv) publish(b *testing.B, events []*event.ConversationCompletedEvent) time.Duration {
	start := time.Now()
	work := make(chan *event.ConversationCompletedEvent, 256)
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := be.pub.PublishCompleted(ctx, e)
				cancel()
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for _, e := range events {
		work <- e
	}
	close(work)
	wg.Wait()
	return time.Since(start)
}

// drained reports whether the summarizer consumer has settled every stored event.
func (be *benchEnv) drained() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := be.js.Stream(ctx, "MATE_EVENTS")
	if err != nil {
		return false, err.Error()
	}
	si, err := s.Info(ctx)
	if err != nil {
		return false, err.Error()
	}
	c, err := s.Consumer(ctx, "summarizer")
	if err != nil {
		return false, err.Error()
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return false, err.Error()
	}
	return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream >= si.State.LastSeq,
		fmt.Sprintf("pending %d, ack pending %d, ack floor %d of %d", ci.NumPending, ci.NumAckPending, ci.AckFloor.Stream, si.State.LastSeq)
}

// run publishes events and waits until all are settled; it returns the time from the first
// publish to the last acknowledgement, and the publish time.
func (be *benchEnv) run(b *testing.B, events []*event.ConversationCompletedEvent) (total, publish time.Duration) {
	start := time.Now()
	publish = be.publish(b, events)
	poll.UntilReason(b, 30*time.Minute, "every event settled", be.drained, poll.Every(100*time.Millisecond))
	return time.Since(start), publish
}

// benchEvents is agents × convs events, conversation by conversation (each agent's events
// far apart in the stream, as from many independent users), agent ids from first.
func benchEvents(first int64, agents, convs int, tag string) []*event.ConversationCompletedEvent {
	var out []*event.ConversationCompletedEvent
	for conv := 1; conv <= convs; conv++ {
		for a := 0; a < agents; a++ {
			e := conversationEvent(first+int64(a), conv)
			e.EventID += "-" + tag
			out = append(out, e)
		}
	}
	return out
}

func (be *benchEnv) report(b *testing.B, procs, events int, total time.Duration) {
	if n := deadLetters(b, be.js); n != 0 {
		b.Errorf("%d dead letters", n)
	}
	be.llm.checkNoOverlap(b)
	rate := float64(events) / total.Seconds()
	ideal := float64(procs*perProcess()) / benchLLMDelay.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(ideal, "ideal-events/s")
	b.ReportMetric(rate/ideal, "ratio")
	b.ReportMetric(total.Seconds(), "s")
	b.ReportMetric(float64(be.llm.extracts.Load()), "llm-calls")
	b.Logf("%s, %d processes × %d in flight: %d events in %s = %.1f events/s, ideal %.0f (%.0f%%), %d LLM calls",
		be.db.Name, procs, perProcess(), events, total.Round(time.Millisecond), rate, ideal, 100*rate/ideal, be.llm.extracts.Load())
}

// BenchmarkClusterSummarizers: throughput of 1, 2, 4 and 8 summarizer processes over 1,000
// agents, one event each (one LLM call each), fake LLM answering after 200 ms, against
// the ideal of processes × per-process concurrency × 5 calls per second, with the streams
// and buckets at the replica counts in MATE_BENCH_REPLICAS (default 1,3). It also reports
// the CPU time per event of the summarizer processes, of this process (the three NATS
// nodes, the fake LLM, the publisher) and of the local MariaDB server (shared with whatever
// else uses it).
func BenchmarkClusterSummarizers(b *testing.B) {
	for _, replicas := range benchList(b, "MATE_BENCH_REPLICAS", []int{1, 3}) {
		for _, procs := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("R%d/processes=%d", replicas, procs), func(b *testing.B) {
				be := newBenchEnv(b, procs, replicas)
				const agents = 1000
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					be.llm.extracts.Store(0)
					events := benchEvents(int64(i*agents+1), agents, 1, fmt.Sprintf("t%d", i))
					cpu0 := be.cpu()
					total, _ := be.run(b, events)
					be.report(b, procs, len(events), total)
					be.reportCPU(b, cpu0, len(events))
				}
			})
		}
	}
}

// benchList reads a comma-separated list of positive numbers from the environment.
func benchList(b *testing.B, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want numbers such as 1,3", name, v)
		}
		out = append(out, n)
	}
	return out
}

// cpuSample is the CPU time used so far by the summarizer processes, this process, and
// the local database server.
type cpuSample struct{ workers, self, db time.Duration }

func (be *benchEnv) cpu() cpuSample {
	var s cpuSample
	be.mu.Lock()
	for _, p := range be.procs {
		s.workers += procCPU(p.cmd.Process.Pid)
	}
	be.mu.Unlock()
	s.self = procCPU(os.Getpid())
	if pid := findProcess("mariadbd", "mysqld"); pid > 0 {
		s.db = procCPU(pid)
	}
	return s
}

func (be *benchEnv) reportCPU(b *testing.B, from cpuSample, events int) {
	to := be.cpu()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(events) }
	b.ReportMetric(per(to.workers-from.workers), "summarizers-cpu-ms/event")
	b.ReportMetric(per(to.self-from.self), "nats+llm-cpu-ms/event")
	if be.db.Name == "mysql" {
		b.ReportMetric(per(to.db-from.db), "mariadbd-cpu-ms/event")
	}
}

// procCPU is a process's user and system CPU time (Linux /proc; 0 elsewhere).
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which is in parentheses and may hold spaces).
	_, rest, ok := strings.Cut(string(raw), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / hz
}

// findProcess returns the pid of the first process whose command is one of names.
func findProcess(names ...string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.TrimSpace(string(comm)) == n {
				return pid
			}
		}
	}
	return 0
}

// BenchmarkClusterDrain: the drain time of a backlog of 10,000 events (1,000 agents × 10
// conversations, one LLM call each) arriving at once, for the process counts in
// MATE_BENCH_DRAIN_PROCS (default 8).
func BenchmarkClusterDrain(b *testing.B) {
	procsList := []int{8}
	if v := os.Getenv("MATE_BENCH_DRAIN_PROCS"); v != "" {
		procsList = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("MATE_BENCH_DRAIN_PROCS=%q: want process counts such as 4,8", v)
			}
			procsList = append(procsList, n)
		}
	}
	for _, procs := range procsList {
		b.Run(fmt.Sprintf("processes=%d", procs), func(b *testing.B) {
			be := newBenchEnv(b, procs, 3)
			const agents, convs = 1000, 10
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				be.llm.extracts.Store(0)
				events := benchEvents(int64(i*agents+1), agents, convs, fmt.Sprintf("d%d", i))
				total, publish := be.run(b, events)
				be.report(b, procs, len(events), total)
				b.ReportMetric(publish.Seconds(), "publish-s")
			}
		})
	}
}
