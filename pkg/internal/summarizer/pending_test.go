package summarizer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// pendingConvs lists the pending view's conversations as "id:messages".
func pendingConvs(p Pending) string {
	var out []string
	for _, c := range p.Conversations {
		out = append(out, fmt.Sprintf("%s:%d", c.ConversationID, c.Messages))
	}
	return strings.Join(out, " ")
}

// Events deferred by a held lease or the cooldown, and events coalesced behind the waiter,
// have no ledger row: GET /api/v1/agents/{agentId}/pending shows them (the lease's holder,
// the cooldown's end, the waiter, the coalesced events, the conversations waiting), and is
// empty once the extraction covered them.
func TestPendingShowsWhatWaits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		// A cooldown that outlasts the test's steps; its end is written into the record below.
		h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) { s.Memory.CooldownMinutes = 1 }))
		srv := h.httpServer(config.APIKey{Key: "k1", Agents: []string{"1"}}, config.APIKey{Key: "k2", Agents: []string{"2"}})
		ctx := context.Background()
		get := func(what string) Pending {
			t.Helper()
			st, r := call(t, "GET", srv.URL+"/api/v1/agents/1/pending", "k1", "")
			if st != 200 {
				t.Fatalf("%s: GET pending: %d %s", what, st, r.Msg)
			}
			var p Pending
			if err := json.Unmarshal(r.Data, &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
		if st, r := call(t, "GET", srv.URL+"/api/v1/agents/1/pending", "k2", ""); st != 403 {
			t.Fatalf("another agent's key: %d %s", st, r.Msg)
		}
		if p := get("a new agent"); p.State != PendingStateIdle || p.Lease != nil || p.Cooldown != nil || p.Waiter != nil ||
			len(p.Coalesced) != 0 || len(p.Conversations) != 0 {
			t.Fatalf("a new agent's pending view: %+v", p)
		}
		for c := 1; c <= 4; c++ {
			h.conversation(1, fmt.Sprintf("c%d", c), fmt.Sprintf("t1-%d", c), 4)
		}
		svc := h.service("w1")
		holder, err := lease.Bucket(ctx, h.js, bus.BucketLease, h.set.LeaseTTL, 1, "emergence@test")
		if err != nil {
			t.Fatal(err)
		}

		// 1. Another worker holds the agent's lease: e-1 is deferred, with no ledger row.
		l, err := holder.Acquire(ctx, 1, "emergence")
		if err != nil {
			t.Fatal(err)
		}
		if r := svc.Handle(ctx, JobFromEvent(completed(1, "c1", "e-1", 4))); !r.Retry || r.Deferral != "lease" {
			t.Fatalf("e-1 under a held lease: %+v", r)
		}
		if runs := h.runs("e-1"); len(runs) != 0 {
			t.Fatalf("a deferral has ledger rows: %+v", runs)
		}
		p := get("lease held")
		if p.State != PendingStateLeased || p.Lease == nil || p.Lease.Owner != "emergence@test" || p.Lease.Purpose != "emergence" ||
			!p.Lease.Expires.After(p.Now) || pendingConvs(p) != "c1:4" || p.Cooldown != nil || p.Waiter != nil {
			t.Fatalf("the pending view while the lease is held: %+v", p)
		}
		if p.Conversations[0].ExtractedThrough != 0 || p.Conversations[0].Since.IsZero() || p.Conversations[0].LastMessageID == 0 {
			t.Fatalf("the waiting conversation: %+v", p.Conversations[0])
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// 2. Its redelivery extracts c1 and starts the cooldown: nothing waits.
		job := JobFromEvent(completed(1, "c1", "e-1", 4))
		job.Attempt = 2
		first := svc.Handle(ctx, job)
		if first.Status != store.RunCompleted {
			t.Fatalf("e-1 redelivered: %+v", first)
		}
		p = get("after the first extraction")
		if p.State != PendingStateIdle || len(p.Conversations) != 0 || p.Cooldown == nil || p.Cooldown.RunID != first.RunID || !p.Cooldown.Until.After(p.Now) {
			t.Fatalf("after the first extraction: %+v", p)
		}

		// 3. During the cooldown e-2 waits for its end, e-3 is coalesced behind it, and e-4,
		// arriving while a worker holds the lease, is deferred.
		if r := svc.Handle(ctx, JobFromEvent(completed(1, "c2", "e-2", 4))); !r.Retry || r.Deferral != "cooldown" {
			t.Fatalf("e-2: %+v", r)
		}
		if r := svc.Handle(ctx, JobFromEvent(completed(1, "c3", "e-3", 4))); r.Retry || r.Deferral != deferralCoalesced {
			t.Fatalf("e-3: %+v", r)
		}
		if l, err = holder.Acquire(ctx, 1, "emergence"); err != nil {
			t.Fatal(err)
		}
		if r := svc.Handle(ctx, JobFromEvent(completed(1, "c4", "e-4", 4))); !r.Retry {
			t.Fatalf("e-4: %+v", r)
		}
		for _, e := range []string{"e-2", "e-3", "e-4"} {
			if runs := h.runs(e); len(runs) != 0 {
				t.Fatalf("%s has ledger rows while it waits: %+v", e, runs)
			}
		}
		p = get("cooldown and lease")
		if p.State != PendingStateLeased || p.Lease == nil || p.Cooldown == nil || p.Waiter == nil || p.Waiter.EventID != "e-2" ||
			p.Waiter.Overdue || !p.Waiter.ExpectedBy.After(p.Cooldown.Until) ||
			len(p.Coalesced) != 1 || p.Coalesced[0] != (PendingEvent{EventID: "e-3", ConversationID: "c3"}) ||
			pendingConvs(p) != "c2:4 c3:4 c4:4" {
			t.Fatalf("the pending view during the cooldown, with the lease held: %+v", p)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		p = get("cooldown")
		if p.State != PendingStateCooldown || p.Lease != nil || !strings.Contains(p.Summary, "e-2") || !strings.Contains(p.Summary, stamp(p.Cooldown.Until)) ||
			!strings.Contains(p.Summary, "3 conversations") || !strings.Contains(p.Summary, "1 event coalesced") {
			t.Fatalf("the pending view during the cooldown: %+v", p)
		}

		// 4. The cooldown ends (written into the record, as its time passing would leave it):
		// the waiter is due, and its redelivery extracts everything waiting.
		st := h.record(svc, 1)
		if _, err := svc.d.Leases.Update(ctx, 1, st, func(r *lease.Record) { r.CooldownUntil = time.Now().Add(-time.Millisecond) }); err != nil {
			t.Fatal(err)
		}
		if p = get("cooldown over"); p.State != PendingStateWaiting || p.Cooldown != nil || p.Waiter == nil {
			t.Fatalf("the pending view after the cooldown: %+v", p)
		}
		waiter := JobFromEvent(completed(1, "c2", "e-2", 4))
		waiter.Attempt = 2
		done := svc.Handle(ctx, waiter)
		if done.Status != store.RunCompleted || done.Retry {
			t.Fatalf("the waiter's redelivery: %+v", done)
		}
		p = get("after the extraction")
		if p.State != PendingStateIdle || p.Lease != nil || p.Waiter != nil || len(p.Coalesced) != 0 || len(p.Conversations) != 0 {
			t.Fatalf("the pending view after the extraction: %+v", p)
		}
		if p.Cooldown == nil || p.Cooldown.RunID != done.RunID {
			t.Fatalf("the new cooldown: %+v, want the one run %s started", p.Cooldown, done.RunID)
		}
	})
}

// Each state of the pending view says why what waits is not extracted yet.
func TestPendingExplains(t *testing.T) {
	now := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	convs := []PendingConversation{{ConversationID: "c1", Messages: 4}, {ConversationID: "c2", Messages: 2}}
	coalesced := []PendingEvent{{EventID: "e-3", ConversationID: "c2"}}
	cooldown := &PendingCooldown{Until: now.Add(time.Minute)}
	live := &PendingWaiter{EventID: "e-2", ExpectedBy: now.Add(3 * time.Minute)}
	overdue := &PendingWaiter{EventID: "e-2", ExpectedBy: now.Add(-time.Minute), Overdue: true}
	held := &PendingLease{Owner: "summarizer@h/1", Purpose: "summarize", Expires: now.Add(time.Second)}
	cases := []struct {
		name  string
		v     Pending
		state string
		says  []string
	}{
		{"nothing", Pending{}, PendingStateIdle, []string{"Nothing waits"}},
		{"a waiter with its work done", Pending{Waiter: live}, PendingStateIdle, []string{"e-2", "find its work done"}},
		{"an overdue waiter, nothing waits", Pending{Waiter: overdue}, PendingStateIdle, []string{"e-2", "harmless"}},
		{"lease held", Pending{Lease: held, Conversations: convs, Cooldown: cooldown}, PendingStateLeased,
			[]string{"summarizer@h/1", "(summarize)", "2026-04-01T10:00:01Z", "Waiting: 2 conversations"}},
		{"lease held, nothing waits", Pending{Lease: held}, PendingStateLeased, []string{"summarizer@h/1"}},
		{"cooldown", Pending{Cooldown: cooldown, Waiter: live, Coalesced: coalesced, Conversations: convs}, PendingStateCooldown,
			[]string{"2026-04-01T10:01:00Z", "event e-2 is redelivered then", "2 conversations", "1 event coalesced"}},
		{"cooldown, waiter overdue", Pending{Cooldown: cooldown, Waiter: overdue, Conversations: convs[:1]}, PendingStateCooldown,
			[]string{"an event deferred earlier comes back", "1 conversation with"}},
		{"waiter due", Pending{Waiter: live, Coalesced: coalesced, Conversations: convs}, PendingStateWaiting,
			[]string{"cooldown is over", "e-2", "2026-04-01T10:03:00Z"}},
		{"stranded", Pending{Waiter: overdue, Coalesced: coalesced, Conversations: convs}, PendingStateStranded,
			[]string{"Waiter e-2 did not come back by 2026-04-01T09:59:00Z", "stranded sweep (every 10m0s)"}},
		{"stranded, no waiter", Pending{Coalesced: coalesced}, PendingStateStranded, []string{"No waiter", "1 event coalesced"}},
		{"queued", Pending{Conversations: convs, MoreConversations: true}, PendingStateQueued,
			[]string{"Nothing in the agent's record", "dead letters", "more than 2 conversations"}},
	}
	r := &PendingReader{sweepEvery: 10 * time.Minute}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state, says := r.explain(c.v)
			if state != c.state {
				t.Errorf("state %q, want %q (%s)", state, c.state, says)
			}
			for _, s := range c.says {
				if !strings.Contains(says, s) {
					t.Errorf("%q does not say %q", says, s)
				}
			}
		})
	}
}

// BenchmarkPendingView reads the pending view of an agent with 2,000 registered
// conversations of 4 messages, 50 of them not yet extracted, against the baseline of what the
// console's agent page read before it (the agent's files and its last 10 runs), in the same
// run. With MATE_TEST_MYSQL_DSN set it runs on MariaDB too.
func BenchmarkPendingView(b *testing.B) {
	for _, name := range []string{"sqlite", "mysql"} {
		b.Run("db="+name, func(b *testing.B) {
			db := storetest.SQLite(b)
			if name == "mysql" {
				var ok bool
				if db, ok = storetest.MySQL(b); !ok {
					b.Skip("MATE_TEST_MYSQL_DSN not set")
				}
			}
			pendingView(b, db)
		})
	}
}

func pendingView(b *testing.B, db storetest.DB) {
	h := newHarness(b, db)
	ctx := context.Background()
	const convs, pending, per = 2000, 50, 4
	now := time.Now().UTC()
	msgs := make([]store.Message, 0, convs*per)
	for c := 0; c < convs; c++ {
		for i := 0; i < per; i++ {
			msgs = append(msgs, store.Message{AgentID: 1, ConversationID: fmt.Sprintf("c%04d", c), Role: "user",
				Content: "how should we plan the release?", CreateTime: now})
		}
	}
	if err := db.DB.CreateInBatches(msgs, 500).Error; err != nil {
		b.Fatal(err)
	}
	wms := make([]store.ExtractionWatermark, convs)
	for c := range wms {
		wms[c] = store.ExtractionWatermark{AgentID: 1, ConversationID: fmt.Sprintf("c%04d", c), UpdateTime: now}
		if c >= pending {
			wms[c].LastMessageID = msgs[c*per+per-1].ID
		}
	}
	if err := db.DB.CreateInBatches(wms, 500).Error; err != nil {
		b.Fatal(err)
	}
	svc := h.service("w1")
	if _, err := svc.d.Leases.Update(ctx, 1, lease.State{}, func(r *lease.Record) { r.CooldownUntil = now.Add(time.Hour) }); err != nil {
		b.Fatal(err)
	}
	r := NewPendingReader(svc.d.Leases, svc.d.Messages, time.Minute)
	if p, err := r.Pending(ctx, 1); err != nil || len(p.Conversations) != pending || p.State != PendingStateCooldown {
		b.Fatalf("pending view: %d conversations, state %s, %v", len(p.Conversations), p.State, err)
	}
	b.Run("baseline=files+runs", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.ws.List(ctx, 1, ""); err != nil {
				b.Fatal(err)
			}
			if _, err := h.ledger.List(ctx, ledger.Filter{AgentID: 1, Limit: 10}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pending", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Pending(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
