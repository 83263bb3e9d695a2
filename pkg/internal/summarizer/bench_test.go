package summarizer

// Benchmarks of the event pipeline. Each iteration runs a fixed workload and reports its
// own figures (b.ReportMetric), so -benchtime=1x is enough:
//
//	go test ./pkg/internal/summarizer -run '^$' -bench . -benchtime=1x
//
// Figures and the machine they were measured on: docs/benchmarks.md.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// withSyncAlways runs the embedded server with fsync on every write, as make run ships it.
func withSyncAlways() harnessOption { return func(h *harness) { h.syncAlways = true } }

// BenchmarkPublish compares events/s through POST /api/v1/events/conversation-completed
// with raw nats.go synchronous JetStream publishes (with ack) of the same event to the same
// server, in the same run, the two alternating in rounds of perClient/8 events per client.
func BenchmarkPublish(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, clients := range []int{1, 16} {
			name := fmt.Sprintf("fsync=%s/clients=%d", map[bool]string{true: "always", false: "default"}[sync], clients)
			b.Run(name, func(b *testing.B) {
				opts := []harnessOption{}
				if sync {
					opts = append(opts, withSyncAlways())
				}
				h := newHarness(b, storetest.SQLite(b), opts...)
				srv := h.httpServer()
				const perClient = 400
				total := perClient * clients
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				url := srv.URL + "/api/v1/events/conversation-completed"
				var rawRate, httpRate float64
				// The two paths alternate in rounds, so that a change of the machine's load
				// (other processes share its two cores) weighs on both alike.
				const rounds = 8
				for i := 0; i < b.N; i++ {
					var httpTime, rawTime time.Duration
					for r := 0; r < rounds; r++ {
						start := time.Now()
						runClients(b, clients, func(c int) {
							for k := r * perClient / rounds; k < (r+1)*perClient/rounds; k++ {
								body := fmt.Sprintf(`{"eventId":"http-%d-%d-%d","agentId":%d,"conversationId":"c","userMessage":"hello there, friend","assistantReply":"hi","messageCount":4,"triggerSource":"web"}`, i, c, k, c+1)
								resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(body)))
								if err != nil {
									b.Error(err)
									return
								}
								_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
								resp.Body.Close()
								if resp.StatusCode != 202 {
									b.Errorf("status %d", resp.StatusCode)
									return
								}
							}
						})
						httpTime += time.Since(start)

						start = time.Now()
						runClients(b, clients, func(c int) {
							for k := r * perClient / rounds; k < (r+1)*perClient/rounds; k++ {
								msg := &nats.Msg{Subject: fmt.Sprintf("mate.conversation.completed.%d", c+1),
									Data: []byte(fmt.Sprintf(`{"eventId":"raw-%d-%d-%d","agentId":%d,"conversationId":"c","userMessage":"hello there, friend","assistantReply":"hi","messageCount":4,"triggerSource":"web"}`, i, c, k, c+1))}
								if _, err := h.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(fmt.Sprintf("raw-%d-%d-%d", i, c, k))); err != nil {
									b.Error(err)
									return
								}
							}
						})
						rawTime += time.Since(start)
					}
					httpRate = float64(total) / httpTime.Seconds()
					rawRate = float64(total) / rawTime.Seconds()
				}
				b.ReportMetric(httpRate, "http-events/s")
				b.ReportMetric(rawRate, "raw-events/s")
				b.ReportMetric(httpRate/rawRate, "http/raw")
			})
		}
	}
}

func runClients(b *testing.B, n int, fn func(c int)) {
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			fn(c)
		}(c)
	}
	wg.Wait()
}

// BenchmarkPipelineOverhead measures one event at a time, each for a different agent seen
// before (no cooldown to wait for, no lease contention), against a fake LLM that answers at once: the
// time from the publish call to the delivery being acknowledged after the daily note was
// written, and the CPU time this process spent per event (it also runs the NATS server and,
// on SQLite, the database). The same run first measures the floor (one publish with ack,
// one pull and ack, one KV compare-and-swap, one SQL transaction appending a row) on the
// same server and database, and reports the pipeline as a ratio to it. With
// MATE_TEST_MYSQL_DSN set it runs on MariaDB too (whose server's CPU is not counted).
func BenchmarkPipelineOverhead(b *testing.B) {
	for _, name := range []string{"sqlite", "mysql"} {
		b.Run("db="+name, func(b *testing.B) {
			db := storetest.SQLite(b)
			if name == "mysql" {
				var ok bool
				if db, ok = storetest.MySQL(b); !ok {
					b.Skip("MATE_TEST_MYSQL_DSN not set")
				}
			}
			pipelineOverhead(b, db)
		})
	}
}

func pipelineOverhead(b *testing.B, db storetest.DB) {
	// The fake model answers from a child process: its CPU is not this process's, as a real
	// model's (or MariaDB's server's) is not. MATE_BENCH_FAKE_LLM=inprocess serves it from
	// this process, as before (to compare with measurements made so).
	var llmOpt harnessOption
	if os.Getenv("MATE_BENCH_FAKE_LLM") == "inprocess" {
		llmOpt = withLLM(llmtest.New(b, echoLLM))
	} else {
		llmOpt = withExternalLLM(llmtest.NewExternal(b, "echo"))
	}
	sqlc := &sqlCounter{}
	// The shipped cooldown (each event is another agent's, so none waits for it): setting it
	// is part of an extraction's cost.
	h := newHarness(b, db, llmOpt, withSyncAlways(), withSQLCounter(sqlc),
		withSettings(func(s *Settings) { s.Memory.CooldownMinutes = 5 }))
	const events = 200
	for a := 1; a <= events; a++ {
		h.conversation(int64(a), "c1", fmt.Sprintf("t%d-1", a), 4)
		if _, err := h.ws.EnsureAgent(context.Background(), int64(a)); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	fl := newFloor(b, h.js, h.db.DB)
	for i := 0; i < 20; i++ { // warm up
		if err := fl.event(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Latency runs to the ack; the next event is published once the worker is done with the
	// last one (its lease released), so the counters are exact.
	done := make(chan Result, 1)
	acked := make(chan time.Time, 1)
	svc, snc := h.serviceConn("w1")
	w := h.worker(svc)
	w.settled = func(jetstream.Msg, Result) { acked <- time.Now() }
	w.finished = func(_ jetstream.Msg, res Result) { done <- res }
	var lat, flat []time.Duration
	for i := 0; i < b.N; i++ {
		flat = flat[:0]
		cpu0 := cpuTime()
		for k := 0; k < events; k++ {
			start := time.Now()
			if err := fl.event(ctx); err != nil {
				b.Fatal(err)
			}
			flat = append(flat, time.Since(start))
		}
		floorCPU := cpuTime() - cpu0

		lat = lat[:0]
		stmts, ops, writes := sqlc.n.Load(), sent(snc), kvWrites(b, h.js)
		conns := newConns(b, h.db.DB)
		cpu0 = cpuTime()
		for a := 1; a <= events; a++ {
			start := time.Now()
			h.publish(completed(int64(a), "c1", fmt.Sprintf("e-%d-%d", i, a), 4))
			res := <-done
			lat = append(lat, (<-acked).Sub(start))
			if i == 0 && res.Status != "completed" {
				b.Fatalf("event %d: %s %s", a, res.Status, res.Reason)
			}
		}
		cpu := cpuTime() - cpu0
		// Later iterations find everything covered; the first one is what counts.
		if i > 0 {
			continue
		}
		perEvent := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / events }
		fp50, fp99 := percentile(flat, 0.5), percentile(flat, 0.99)
		p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
		b.ReportMetric(perEvent(floorCPU), "floor-cpu-ms/event")
		b.ReportMetric(fp50, "floor-p50-ms")
		b.ReportMetric(fp99, "floor-p99-ms")
		b.ReportMetric(perEvent(cpu), "extract-cpu-ms/event")
		b.ReportMetric(p50, "extract-p50-ms")
		b.ReportMetric(p99, "extract-p99-ms")
		b.ReportMetric(float64(cpu)/float64(floorCPU), "cpu/floor")
		b.ReportMetric(p50/fp50, "p50/floor")
		b.ReportMetric(p99/fp99, "p99/floor")
		b.ReportMetric(float64(sqlc.n.Load()-stmts)/events, "sql-stmts/event")
		b.ReportMetric(float64(newConns(b, h.db.DB)-conns)/events, "new-conns/event")
		b.ReportMetric(float64(sent(snc)-ops)/events, "kv-ops/event")
		b.ReportMetric(float64(kvWrites(b, h.js)-writes)/events, "kv-writes/event")

		// Each agent's cooldown runs now: a second event per agent waits for it, a third is
		// acknowledged into the extraction that follows it.
		for _, phase := range []struct {
			conv, what, want string
		}{{"c2", "wait", "cooldown"}, {"c3", "coalesce", deferralCoalesced}} {
			for a := 1; a <= events; a++ {
				h.conversation(int64(a), phase.conv, fmt.Sprintf("t%d-%s", a, phase.conv), 4)
			}
			lat = lat[:0]
			stmts, ops, writes = sqlc.n.Load(), sent(snc), kvWrites(b, h.js)
			cpu0 = cpuTime()
			for a := 1; a <= events; a++ {
				start := time.Now()
				h.publish(completed(int64(a), phase.conv, fmt.Sprintf("e-%s-%d", phase.conv, a), 4))
				res := <-done
				lat = append(lat, (<-acked).Sub(start))
				if res.Deferral != phase.want {
					b.Fatalf("%s event %d: %s %s (%s)", phase.what, a, res.Status, res.Reason, res.Deferral)
				}
			}
			cpu = cpuTime() - cpu0
			b.ReportMetric(perEvent(cpu), phase.what+"-cpu-ms/event")
			b.ReportMetric(percentile(lat, 0.5), phase.what+"-p50-ms")
			b.ReportMetric(float64(sqlc.n.Load()-stmts)/events, phase.what+"-sql-stmts/event")
			b.ReportMetric(float64(sent(snc)-ops)/events, phase.what+"-kv-ops/event")
			b.ReportMetric(float64(kvWrites(b, h.js)-writes)/events, phase.what+"-kv-writes/event")
		}
	}
}

// newConns is how many connections the pool has opened so far: those open and those it
// closed (for want of idle room, idle too long, too old).
func newConns(b *testing.B, db *gorm.DB) int64 {
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	st := sqlDB.Stats()
	return int64(st.OpenConnections) + st.MaxIdleClosed + st.MaxIdleTimeClosed + st.MaxLifetimeClosed
}

// percentile is the p-th percentile of lat in milliseconds.
func percentile(lat []time.Duration, p float64) float64 {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}

// BenchmarkWorkers measures throughput with 1, 2 and 4 summarizer workers (each handling
// Settings.Concurrency deliveries at once) over 100 agents, one event each, with a fake LLM
// that takes 100 ms per call.
func BenchmarkWorkers(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			fake := llmtest.New(b, func(r llmtest.Received) llmtest.Reply {
				rep := echoLLM(r)
				rep.Delay = 100 * time.Millisecond
				return rep
			})
			h := newHarness(b, storetest.SQLite(b), withLLM(fake), withSyncAlways())
			const agents = 100
			var mu sync.Mutex
			settled := 0
			all := make(chan struct{})
			for i := 0; i < b.N; i++ {
				for a := 1; a <= agents; a++ {
					h.conversation(int64(a), fmt.Sprintf("c%d", i), fmt.Sprintf("t%d-%d", a, i), 4)
				}
				mu.Lock()
				settled = 0
				all = make(chan struct{})
				mu.Unlock()
				if i == 0 {
					for k := 0; k < n; k++ {
						w := h.worker(h.service(fmt.Sprintf("w%d", k)))
						w.settled = func(_ jetstream.Msg, res Result) {
							if res.Retry {
								return
							}
							mu.Lock()
							settled++
							if settled == agents {
								close(all)
							}
							mu.Unlock()
						}
					}
				}
				calls := fake.Calls.Load()
				start := time.Now()
				for a := 1; a <= agents; a++ {
					h.publish(completed(int64(a), fmt.Sprintf("c%d", i), fmt.Sprintf("e-%d-%d", i, a), 4))
				}
				mu.Lock()
				ch := all
				mu.Unlock()
				<-ch
				el := time.Since(start)
				b.ReportMetric(float64(agents)/el.Seconds(), "events/s")
				b.ReportMetric(float64(fake.Calls.Load()-calls), "llm-calls")
				b.ReportMetric(float64(n*h.set.Concurrency), "in-flight-max")
			}
		})
	}
}
