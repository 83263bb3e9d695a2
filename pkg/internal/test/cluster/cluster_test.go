package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/poll"
)

// The two pipeline tests each run a cluster, an API and several summarizers; they take
// turns, while the scheduler test (mostly waiting for the clock) runs beside them.
var pipelineSlot = make(chan struct{}, 1)

func takePipelineSlot(t *testing.T) {
	pipelineSlot <- struct{}{}
	t.Cleanup(func() { <-pipelineSlot })
}

// publishAll publishes events through the API from `publishers` goroutines, each pausing
// `pace` between events, retrying like a chat service; it returns when all are done.
func publishAll(t *testing.T, c *client.Client, events []*event.ConversationCompletedEvent, publishers int, pace time.Duration, pub *published, count *atomic.Int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	work := make(chan *event.ConversationCompletedEvent)
	var wg sync.WaitGroup
	for i := 0; i < publishers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				ok, tries, err := publishRetrying(ctx, c, e)
				pub.add(e, ok, tries, err)
				if count != nil {
					count.Add(1)
				}
				if pace > 0 {
					time.Sleep(pace) // the chat traffic's pace, not a wait for an outcome
				}
			}
		}()
	}
	for _, e := range events {
		work <- e
	}
	close(work)
	wg.Wait()
}

func interleaved(agents, convs int) []*event.ConversationCompletedEvent {
	var out []*event.ConversationCompletedEvent
	for conv := 1; conv <= convs; conv++ {
		for a := 1; a <= agents; a++ {
			out = append(out, conversationEvent(int64(a), conv))
		}
	}
	return out
}

// streamLeader is the index (0-based) of the node leading stream name.
func streamLeader(t *testing.T, js jetstream.JetStream, name string) int {
	t.Helper()
	var idx int
	poll.UntilReason(t, 30*time.Second, name+" has a leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return false, "no leader"
		}
		_, err = fmt.Sscanf(info.Cluster.Leader, "n%d", &idx)
		return err == nil, info.Cluster.Leader
	}, poll.Every(100*time.Millisecond))
	return idx - 1
}

// TestNodeLossKeepsEveryEvent publishes completions through the API while the node leading
// MATE_EVENTS is killed and later restarted: every event the API accepted (2xx) reaches
// its agent's daily note exactly once, with one appending run and a completed run in the
// ledger; the API stays ready on two of three nodes; every process stops cleanly.
func TestNodeLossKeepsEveryEvent(t *testing.T) {
	t.Parallel()
	takePipelineSlot(t)
	forDB(t, func(t *testing.T, db database) {
		llm := newFakeLLM(t, 100*time.Millisecond)
		e := newEnv(t, db, llm, "MATE_MEMORY_COOLDOWN_MINUTES=0.02")
		api := e.start("api", "api")
		sums := []*proc{e.start("summarizer", "summarizer-1"), e.start("summarizer", "summarizer-2")}
		js := e.js()
		checkReplicas(t, js)
		c := e.client(api)

		const agents, convs = 16, 10
		events := interleaved(agents, convs)
		var pub published
		var count atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			publishAll(t, c, events, 4, 100*time.Millisecond, &pub, &count)
		}()

		// Kill the stream leader once a quarter is in, keep it down for at least 3 s of
		// publishing, then restart it while publishing goes on.
		poll.UntilReason(t, 60*time.Second, "a quarter published", func() (bool, string) {
			return count.Load() >= int64(len(events)/4), fmt.Sprint(count.Load())
		}, poll.Every(100*time.Millisecond))
		victim := streamLeader(t, js, "MATE_EVENTS")
		t.Logf("killing node n%d (MATE_EVENTS leader) after %d events", victim+1, count.Load())
		e.nats.Kill(victim)
		killedAt := time.Now()
		poll.UntilReason(t, 60*time.Second, "the API ready on two nodes", func() (bool, string) {
			st, body := httpGet("http://" + api.Addr + "/readyz")
			return st == 200, body
		}, poll.Every(100*time.Millisecond))
		poll.UntilReason(t, 90*time.Second, "publishing goes on without the node", func() (bool, string) {
			return count.Load() >= int64(len(events)*2/3) && time.Since(killedAt) > 3*time.Second, fmt.Sprint(count.Load())
		}, poll.Every(100*time.Millisecond))
		t.Logf("restarting node n%d after %d events", victim+1, count.Load())
		e.nats.Restart(victim)
		<-done

		if len(pub.refused) > 0 {
			t.Errorf("%d events never accepted: %v", len(pub.refused), pub.refused)
		}
		t.Logf("%d events accepted, %d of them after a retry", len(pub.accepted), pub.retried)
		checkProcessed(t, c, &pub, 3*time.Minute)
		llm.checkNoOverlap(t)
		if n := deadLetters(t, js); n != 0 {
			t.Errorf("%d dead letters", n)
		}
		t.Logf("%d LLM extractions for %d events", llm.extracts.Load(), len(events))
		for _, p := range append(sums, api) {
			p.terminate(t, 30*time.Second)
		}
	})
}

// TestSummarizerKilledMidWork runs three summarizer processes under load and kills one with
// SIGKILL during an LLM call, then stops a second with SIGTERM during one: every event is
// processed, none twice in effect, no two extractions of one agent overlap, and the
// terminated one hands its work back and exits cleanly.
func TestSummarizerKilledMidWork(t *testing.T) {
	t.Parallel()
	takePipelineSlot(t)
	forDB(t, func(t *testing.T, db database) {
		llm := newFakeLLM(t, 300*time.Millisecond)
		e := newEnv(t, db, llm, "MATE_MEMORY_COOLDOWN_MINUTES=0.02")
		api := e.start("api", "api")
		s1 := e.start("summarizer", "summarizer-1")
		s2 := e.start("summarizer", "summarizer-2")
		s3 := e.start("summarizer", "summarizer-3")
		js := e.js()
		c := e.client(api)

		const agents, convs = 40, 3
		events := interleaved(agents, convs)
		var pub published
		done := make(chan struct{})
		go func() {
			defer close(done)
			publishAll(t, c, events, 8, 0, &pub, nil)
		}()

		poll.UntilReason(t, 60*time.Second, "summarizer-1 in an LLM call, after some work", func() (bool, string) {
			return llm.doneCalls.Load() >= 15 && llm.inFlight("summarizer-1") > 0, fmt.Sprintf("%d calls done", llm.doneCalls.Load())
		}, poll.Every(100*time.Millisecond))
		s1.kill(t)
		t.Logf("killed summarizer-1 after %d LLM calls", llm.doneCalls.Load())
		poll.UntilReason(t, 60*time.Second, "summarizer-2 in an LLM call, after more work", func() (bool, string) {
			return llm.doneCalls.Load() >= 40 && llm.inFlight("summarizer-2") > 0, fmt.Sprintf("%d calls done", llm.doneCalls.Load())
		}, poll.Every(100*time.Millisecond))
		took := s2.terminate(t, 30*time.Second)
		t.Logf("summarizer-2 stopped %s after SIGTERM, after %d LLM calls", took.Round(time.Millisecond), llm.doneCalls.Load())
		<-done

		if len(pub.refused) > 0 {
			t.Errorf("%d events never accepted: %v", len(pub.refused), pub.refused)
		}
		checkProcessed(t, c, &pub, 3*time.Minute)
		llm.checkNoOverlap(t)
		if n := deadLetters(t, js); n != 0 {
			t.Errorf("%d dead letters", n)
		}
		t.Logf("%d LLM extractions for %d events", llm.extracts.Load(), len(events))
		s3.terminate(t, 30*time.Second)
		api.terminate(t, 30*time.Second)
	})
}

// cronJob is the part of a cron job the test reads.
type cronJob struct {
	ID          int64      `json:"id"`
	NextRunTime *time.Time `json:"nextRunTime"`
	LastRunTime *time.Time `json:"lastRunTime"`
}

func cronCall(t *testing.T, method, url, body string) cronJob {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Data cronJob `json:"data"`
	}
	if resp.StatusCode >= 300 || json.Unmarshal(raw, &env) != nil {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return env.Data
}

// msgIDs lists the Nats-Msg-Id of every message on stream.
func msgIDs(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("%s seq %d: %v", stream, seq, err)
		}
		ids = append(ids, m.Header.Get("Nats-Msg-Id"))
	}
	return ids
}

// slotIDs keeps the ids of job's slots, sorted.
func slotIDs(ids []string, job int64) []string {
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, fmt.Sprintf("cron:%d:", job)) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func slotID(job int64, slot time.Time) string {
	return fmt.Sprintf("cron:%d:%s", job, slot.UTC().Format(time.RFC3339))
}

// TestSchedulerKilledNoSlotLostOrDoubled runs two scheduler processes with a job every
// minute of each task type, and kills the leader with SIGKILL two seconds before a slot: the
// other takes over, and each slot from the first on is published once (agent trigger and
// emergence request) and consolidated once, none lost, none twice. The scheduler's clock
// is the real one (separate processes), so the test spans two minute slots (~1.5-2 min).
func TestSchedulerKilledNoSlotLostOrDoubled(t *testing.T) {
	t.Parallel()
	forDB(t, func(t *testing.T, db database) {
		llm := newFakeLLM(t, 10*time.Millisecond)
		e := newEnv(t, db, llm)
		api := e.start("api", "api")
		em := e.start("emergence", "emergence")
		scheds := []*proc{e.start("scheduler", "scheduler-1"), e.start("scheduler", "scheduler-2")}
		js := e.js()
		c := e.client(api)

		base := "http://" + api.Addr + "/api/v1/cron-jobs"
		text := cronCall(t, "POST", base, `{"agentId":1,"name":"every minute","cronExpression":"* * * * *","timezone":"UTC","taskType":"text","triggerMessage":"tick","enabled":true}`)
		emer := cronCall(t, "POST", base, `{"agentId":1,"name":"consolidate every minute","cronExpression":"* * * * *","timezone":"UTC","taskType":"emergence","enabled":true}`)
		// Created across a minute boundary, the two jobs start a minute apart.
		first := *text.NextRunTime
		if emer.NextRunTime.After(first) {
			first = *emer.NextRunTime
		}
		second := first.Add(time.Minute)
		t.Logf("first slot %s, leader killed at %s", first.Format(time.TimeOnly), second.Add(-2*time.Second).Format(time.TimeOnly))

		leader := func() *proc {
			var l *proc
			poll.UntilReason(t, 30*time.Second, "one scheduler leads", func() (bool, string) {
				l = nil
				n := 0
				for _, p := range scheds {
					if p.running() && metric(p.Addr, "matememory_scheduler_leader") == 1 {
						l, n = p, n+1
					}
				}
				return n == 1, fmt.Sprintf("%d leaders", n)
			}, poll.Every(100*time.Millisecond))
			return l
		}
		has := func(stream, id string) bool {
			for _, got := range msgIDs(t, js, stream) {
				if got == id {
					return true
				}
			}
			return false
		}
		poll.UntilReason(t, time.Until(first)+40*time.Second, "the first slot fired", func() (bool, string) {
			return has("MATE_AGENT_TRIGGERS", slotID(text.ID, first)) && has("MATE_EMERGENCE", slotID(emer.ID, first)), ""
		}, poll.Every(100*time.Millisecond))
		leader()                                             // exactly one leads before the kill
		time.Sleep(time.Until(second.Add(-2 * time.Second))) // a moment on the clock, not an outcome
		victim := leader()
		victim.kill(t)
		t.Logf("killed %s (leader) at %s", victim.name, time.Now().Format(time.TimeOnly))
		poll.UntilReason(t, time.Until(second)+60*time.Second, "the second slot fired after the hand-over", func() (bool, string) {
			return has("MATE_AGENT_TRIGGERS", slotID(text.ID, second)) && has("MATE_EMERGENCE", slotID(emer.ID, second)), ""
		}, poll.Every(100*time.Millisecond))
		survivor := leader()
		if survivor == victim {
			t.Fatal("the killed scheduler still leads")
		}

		// Each slot once, none lost, on both streams; the emergence worker ran each once.
		last := second
		if now := time.Now().UTC().Truncate(time.Minute); now.After(last) {
			last = now // a third slot may have come meanwhile
		}
		for _, job := range []struct {
			id     int64
			stream string
			first  time.Time
		}{{text.ID, "MATE_AGENT_TRIGGERS", *text.NextRunTime}, {emer.ID, "MATE_EMERGENCE", *emer.NextRunTime}} {
			got := slotIDs(msgIDs(t, js, job.stream), job.id)
			var want []string
			for s := job.first; !s.After(last); s = s.Add(time.Minute) {
				want = append(want, slotID(job.id, s))
			}
			if len(got) > len(want) && got[len(got)-1] == slotID(job.id, last.Add(time.Minute)) {
				got = got[:len(got)-1] // the next slot, fired while we looked
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s: slots %v, want each of %v once", job.stream, got, want)
			}
		}
		poll.UntilReason(t, 60*time.Second, "the emergence worker ran each slot", func() (bool, string) {
			runs, err := c.Runs(context.Background(), 1, client.RunFilter{Kind: "emergence", Limit: 1000})
			if err != nil {
				return false, err.Error()
			}
			per := map[string]int{}
			for _, r := range runs {
				per[r.EventID]++
			}
			for s := first; !s.After(second); s = s.Add(time.Minute) {
				switch n := per[slotID(emer.ID, s)]; {
				case n > 1:
					t.Fatalf("slot %s consolidated %d times", s.Format(time.TimeOnly), n)
				case n == 0:
					return false, fmt.Sprintf("no run for slot %s yet: %v", s.Format(time.TimeOnly), per)
				}
			}
			return true, ""
		}, poll.Every(100*time.Millisecond))
		job := cronCall(t, "GET", fmt.Sprintf("%s/%d", base, text.ID), "")
		if job.LastRunTime == nil || job.LastRunTime.Before(second) {
			t.Errorf("text job's last run %v, want %s or later", job.LastRunTime, second)
		}
		t.Logf("survivor %s: fired %v, duplicates %v, lost races %v", survivor.name,
			metric(survivor.Addr, `matememory_scheduler_slots_total{outcome="fired",task="text"}`),
			metric(survivor.Addr, `matememory_scheduler_slots_total{outcome="duplicate",task="text"}`),
			metric(survivor.Addr, `matememory_scheduler_slots_total{outcome="lost_race",task="text"}`))
		for _, p := range []*proc{survivor, em, api} {
			p.terminate(t, 30*time.Second)
		}
	})
}
