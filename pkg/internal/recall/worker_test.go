package recall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

type observed struct {
	c   recall.Change
	res recall.SyncResult
	err error
}

func TestWorkerIndexesRedeliveryAndCrashPaths(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		r := newRig(t, db, true)
		nc, js := connect(t)
		if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(1, time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := recall.Provision(ctx, js, 1, 30*time.Second, 5); err != nil {
			t.Fatal(err)
		}
		seen := make(chan observed, 100)
		w := recall.NewWorker(js, nc, db.DB, r.ix, slogDiscard(), time.Hour, recall.WorkerWithObserver(func(c recall.Change, res recall.SyncResult, err error) {
			seen <- observed{c, res, err}
		}))
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		sub, err := recall.Subscribe(nc, r.se)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()

		notifier := recall.NewNotifier(nc, slogDiscard())
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"), workspace.WithChangeHook(notifier.Changed))
		ch := workspace.Change{Actor: store.ActorTool}

		// 1. A write is indexed through the stream and found.
		if _, err := ws.Append(ctx, 7, "memory/2026-05-31.md", "Shipped order ORD-2026-0777 to Lisbon.\n", "# 2026-05-31\n\n", ch); err != nil {
			t.Fatal(err)
		}
		first := next(t, seen)
		// Indexed by this delivery, or just before by the start-up reconcile: either way once.
		if first.err != nil || first.c.AgentID != 7 || first.res.Chunks != 1 {
			t.Fatalf("first delivery: %+v (%v)", first, first.err)
		}
		found := func(q string) bool {
			res, err := r.se.Search(ctx, 7, recall.Query{Text: q})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range res.Hits {
				if strings.Contains(h.Snippet, q) {
					return true
				}
			}
			return false
		}
		if !found("ORD-2026-0777") {
			t.Fatal("indexed text not found")
		}

		// 2. Redelivery (a worker that crashed after committing, before acking): the same
		// message again changes nothing and embeds nothing.
		data, _ := json.Marshal(recall.Change{AgentID: 7, Filename: "memory/2026-05-31.md", Version: 1})
		if _, err := js.Publish(ctx, "mate.recall.index.7", data); err != nil {
			t.Fatal(err)
		}
		if o := next(t, seen); o.err != nil || o.res.Outcome != recall.Unchanged || o.res.EmbeddedTexts != 0 {
			t.Fatalf("redelivered message must be a no-op: %+v", o)
		}
		var chunks int64
		db.DB.Model(&store.RecallChunk{}).Where("agent_id = 7 AND filename = ?", "memory/2026-05-31.md").Count(&chunks)
		if chunks != 1 {
			t.Fatalf("%d chunks for one short file: indexed twice?", chunks)
		}

		// 3. An edit: the indexed notice refreshes the cached agent on this replica.
		poll.Until(t, 10*time.Second, "agent 7 cached", func() bool { found("Lisbon"); n, _ := r.se.CacheStats(); return n == 1 })
		if _, _, err := ws.Edit(ctx, 7, "memory/2026-05-31.md", "Lisbon", "Porto", false, workspace.AnyVersion, ch); err != nil {
			t.Fatal(err)
		}
		if o := next(t, seen); o.err != nil || o.res.Chunks != 1 {
			t.Fatalf("edit: %+v", o)
		}
		// The indexed notice refreshes the cached agent in the background, before any search.
		poll.Until(t, 10*time.Second, "the indexed notice to refresh the cache", func() bool {
			var ag store.RecallAgent
			db.DB.Where("agent_id = 7").Take(&ag)
			return r.se.CachedGeneration(7) == ag.Generation
		})
		if !found("Porto") || found("Lisbon") {
			t.Fatal("edit not reflected")
		}

		// 4. A crash between commit and publish (a write whose message never left): the
		// reconciler finds it by update time.
		silent := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		if _, _, err := silent.Write(ctx, 7, "MEMORY.md", "# Facts\n\nThe VPN gateway is vpn-gw-02.\n", workspace.AnyVersion, ch); err != nil {
			t.Fatal(err)
		}
		if found("vpn-gw-02") {
			t.Fatal("nothing indexed the silent write yet; the test would prove nothing")
		}
		rep, err := w.Reconcile(ctx)
		if err != nil || rep.Changed < 1 {
			t.Fatalf("reconcile: %+v %v", rep, err)
		}
		if !found("vpn-gw-02") {
			t.Fatal("reconciled write not found")
		}
		if rep, err := w.Reconcile(ctx); err != nil || rep.Changed != 0 {
			t.Fatalf("second reconcile must change nothing: %+v %v", rep, err)
		}

		// 5. Delete through the stream removes the chunks.
		if err := ws.Delete(ctx, 7, "memory/2026-05-31.md", workspace.AnyVersion, ch); err != nil {
			t.Fatal(err)
		}
		// Removed by this delivery (or by a reconcile sweep just before it: still once).
		if o := next(t, seen); o.err != nil || o.res.Chunks != 0 {
			t.Fatalf("delete: %+v", o)
		}
		db.DB.Model(&store.RecallChunk{}).Where("agent_id = 7 AND filename = ?", "memory/2026-05-31.md").Count(&chunks)
		if chunks != 0 {
			t.Fatalf("%d chunks of a deleted file left", chunks)
		}
		if found("Porto") {
			t.Fatal("deleted text still found")
		}

		// 6. A poison message is dead-lettered, not retried forever.
		if _, err := js.Publish(ctx, "mate.recall.index.7", []byte("{not json")); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 10*time.Second, "the poison message in MATE_DLQ", func() bool {
			dl, err := bus.ListDeadLetters(ctx, js, 0, "", 10)
			return err == nil && len(dl) == 1 && strings.Contains(dl[0].Reason, "undecodable")
		})
	})
}

// next returns the next processed message about the daily note (the seeded core files of a
// new agent have their own messages).
// connect is a connection to a fresh embedded server and its JetStream.
func connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, d := bustest.Server(t)
	return bustest.Connect(t, d, "test")
}

func next(t *testing.T, ch chan observed) observed {
	t.Helper()
	for {
		select {
		case o := <-ch:
			if o.c.Filename == "memory/2026-05-31.md" {
				return o
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no index message processed within 10 s")
			return observed{}
		}
	}
}

func TestBackfillIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		r := newRig(t, db, true)
		for a := int64(1); a <= 3; a++ {
			if _, _, err := r.ws.Write(ctx, a, "memory/2026-05-01.md", "# 2026-05-01\n\nAgent fact.\n", workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
				t.Fatal(err)
			}
		}
		calls := 0
		rep, err := r.ix.Backfill(ctx, 0, func(done, total int, _ recall.BackfillReport) { calls++ })
		// Each agent is seeded with 4 files plus the note.
		if err != nil || rep.Files != 15 || rep.Indexed != 15 || calls != 15 {
			t.Fatalf("first backfill: %v %v (progress calls %d)", rep, err, calls)
		}
		rep, err = r.ix.Backfill(ctx, 0, nil)
		if err != nil || rep.Unchanged != 15 || rep.Indexed != 0 || rep.EmbeddedTexts != 0 {
			t.Fatalf("second backfill must change nothing: %v %v", rep, err)
		}
	})
}

// A burst of index messages about a few agents (each agent's four seeded core files and a
// note, published at once, some twice): every file is indexed, every message is
// acknowledged, and an agent's messages that waited for its previous round are indexed
// together (fewer generation bumps than messages), with nothing left pending.
func TestWorkerBatchesAnAgentsMessages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		r := newRig(t, db, false)
		nc, js := connect(t)
		if err := recall.Provision(ctx, js, 1, 30*time.Second, 5); err != nil {
			t.Fatal(err)
		}
		// The files exist before any message is consumed (written without a hook).
		const agents = 3
		names := append([]string{"memory/2026-05-31.md"}, workspace.CoreFiles...)
		for a := int64(1); a <= agents; a++ {
			if _, err := r.ws.Append(ctx, a, names[0], "Agent fact.\n", "# 2026-05-31\n\n", workspace.Change{Actor: store.ActorTool}); err != nil {
				t.Fatal(err)
			}
		}
		published := 0
		for round := 0; round < 2; round++ {
			for a := int64(1); a <= agents; a++ {
				for _, n := range names {
					data, _ := json.Marshal(recall.Change{AgentID: a, Filename: n, Version: 1})
					if _, err := js.Publish(ctx, bus.AgentSubject(recall.SubjectIndex, a), data); err != nil {
						t.Fatal(err)
					}
					published++
				}
			}
		}
		// The start-up reconcile finds nothing (its watermark is past the writes): the
		// messages do the work.
		if err := db.DB.Save(&store.RecallCursor{Name: "workspace", UpdateTime: now.Add(time.Hour)}).Error; err != nil {
			t.Fatal(err)
		}
		seen := make(chan observed, 2*published)
		w := recall.NewWorker(js, nc, db.DB, r.ix, slogDiscard(), time.Hour, recall.WorkerWithObserver(func(c recall.Change, res recall.SyncResult, err error) {
			seen <- observed{c, res, err}
		}))
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		indexed := map[string]int{}
		for i := 0; i < published; i++ {
			select {
			case o := <-seen:
				if o.err != nil {
					t.Fatalf("%+v: %v", o.c, o.err)
				}
				if o.res.Outcome == recall.Indexed {
					indexed[fmt.Sprint(o.c.AgentID, o.c.Filename)]++
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of %d messages processed", i, published)
			}
		}
		var files int64
		db.DB.Model(&store.RecallFile{}).Count(&files)
		if files != int64(agents*len(names)) {
			t.Fatalf("%d files indexed, want %d", files, agents*len(names))
		}
		if len(indexed) == 0 {
			t.Fatal("no message reported its file indexed")
		}
		// Nothing indexed twice: each file's chunks are there once (the observer reports a
		// batch's result for each of its messages, so two messages of one file may both say
		// indexed).
		var dup int64
		db.DB.Raw("SELECT COUNT(*) FROM (SELECT agent_id, filename, ordinal FROM mate_recall_chunk GROUP BY agent_id, filename, ordinal HAVING COUNT(*) > 1) d").Scan(&dup)
		var chunks, want int64
		db.DB.Model(&store.RecallChunk{}).Count(&chunks)
		db.DB.Model(&store.RecallFile{}).Select("COALESCE(SUM(chunks), 0)").Scan(&want)
		if dup != 0 || chunks != want || chunks == 0 {
			t.Fatalf("%d chunks for %d in the file states, %d duplicated", chunks, want, dup)
		}
		var gens []store.RecallAgent
		db.DB.Find(&gens)
		total := int64(0)
		for _, g := range gens {
			total += g.Generation
		}
		if len(gens) != agents || total >= int64(agents*len(names)) {
			t.Fatalf("generations %+v: want fewer bumps than files (the agent's messages batched)", gens)
		}
		cons, err := js.Consumer(ctx, recall.Stream, recall.Consumer)
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 10*time.Second, "every message acknowledged", func() bool {
			ci, err := cons.Info(ctx)
			return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
		})
	})
}

// Files indexed by an older version (another chunking or term analysis, format 0 before it
// was recorded) are built again by the reconciler, without asking for embeddings again, and
// searches see the new terms; a newer version's rows are left alone.
func TestOlderIndexFormatIsBuiltAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		r := newRig(t, db, true)
		nc, js := connect(t)
		w := recall.NewWorker(js, nc, db.DB, r.ix, slogDiscard(), time.Hour)
		r.write(t, 8, "memory/2026-05-30.md", "# 2026-05-30\n\nThe Wi-Fi password hint changed to 'red kite'.\n")
		r.write(t, 8, "memory/2026-05-29.md", "# 2026-05-29\n\nThe e-mail alias for billing is pay@northwind.example.\n")
		format := func(name string) int {
			var f store.RecallFile
			if err := db.DB.Where("agent_id = 8 AND filename = ?", name).Take(&f).Error; err != nil {
				t.Fatal(err)
			}
			return f.Format
		}
		if got := format("memory/2026-05-30.md"); got != recall.IndexFormat {
			t.Fatalf("format %d after indexing, want %d", got, recall.IndexFormat)
		}
		if _, err := w.Reconcile(ctx); err != nil { // the seeded core files, never indexed
			t.Fatal(err)
		}
		// What an older version stored: no joined compounds, and no format.
		for _, c := range []struct {
			name, joined string
			format       int
		}{{"memory/2026-05-30.md", "wifi", 0}, {"memory/2026-05-29.md", "email", 99}} {
			var rows []store.RecallChunk
			db.DB.Where("agent_id = 8 AND filename = ?", c.name).Find(&rows)
			for _, row := range rows {
				terms := strings.ReplaceAll(" "+row.Terms+" ", " "+c.joined+" ", " ")
				db.DB.Model(&store.RecallChunk{}).Where("agent_id = 8 AND filename = ? AND ordinal = ?", c.name, row.Ordinal).
					Update("terms", strings.TrimSpace(terms))
			}
			db.DB.Model(&store.RecallFile{}).Where("agent_id = 8 AND filename = ?", c.name).Update("format", c.format)
		}
		// Confident hits only (auto-recall's): an explicit search also ranks the chunk that
		// holds "hint" without the compound.
		hits := func(q string) int {
			res, err := recall.NewSearcher(db.DB, lexical.NewAnalyzer(), recall.Settings{}).Search(ctx, 8, recall.Query{Text: q, Auto: true})
			if err != nil {
				t.Fatal(err)
			}
			return len(res.Hits)
		}
		if hits("wifi hint") != 0 || hits("email alias") != 0 {
			t.Fatal("the older terms already find the compounds: the test would prove nothing")
		}
		calls := r.emb.Calls.Load()
		rep, err := w.Reconcile(ctx)
		if err != nil || rep.Changed != 1 {
			t.Fatalf("reconcile: %+v %v; one file of an older format to build again", rep, err)
		}
		if got := format("memory/2026-05-30.md"); got != recall.IndexFormat {
			t.Errorf("format %d after the reconcile, want %d", got, recall.IndexFormat)
		}
		if hits("wifi hint") != 1 {
			t.Error("the file built again is not found by its joined compound")
		}
		if n := r.emb.Calls.Load() - calls; n != 0 {
			t.Errorf("%d embedding calls to build a file again: its texts did not change", n)
		}
		// A newer version's rows: not built back to this version's format.
		if got := format("memory/2026-05-29.md"); got != 99 || hits("email alias") != 0 {
			t.Errorf("a newer format's file was built again (format %d)", got)
		}
		if rep, err := w.Reconcile(ctx); err != nil || rep.Changed != 0 {
			t.Fatalf("second reconcile: %+v %v; nothing left to build", rep, err)
		}
	})
}
