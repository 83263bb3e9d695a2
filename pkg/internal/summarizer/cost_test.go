package summarizer

// Cost counters shared by the per-event budget test and the benchmarks: SQL statements (a
// gorm logger sees each one), KV writes (the sequence numbers of the KV streams on the
// server: each write, delete marker included, is one fsynced stream message), KV operations
// (the requests the service's own NATS connection sends: every one is a KV call) and CPU time
// (getrusage of this process, which also runs the embedded NATS server and SQLite).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// sqlCounter is a gorm logger that counts the statements run through it.
type sqlCounter struct {
	n atomic.Int64

	mu   sync.Mutex
	keep bool
	log  []string
}

func (c *sqlCounter) LogMode(logger.LogLevel) logger.Interface { return c }
func (c *sqlCounter) Info(context.Context, string, ...any)     {}
func (c *sqlCounter) Warn(context.Context, string, ...any)     {}
func (c *sqlCounter) Error(context.Context, string, ...any)    {}
func (c *sqlCounter) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	c.n.Add(1)
	c.mu.Lock()
	if c.keep {
		sql, _ := fc()
		c.log = append(c.log, sql)
	}
	c.mu.Unlock()
}

// statements returns the statements logged since the last call (when keep is set).
func (c *sqlCounter) statements() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.log
	c.log = nil
	return out
}

// counting makes the harness's database count its statements.
func withSQLCounter(c *sqlCounter) harnessOption {
	return func(h *harness) {
		h.db.DB = h.db.DB.Session(&gorm.Session{Logger: c})
	}
}

// kvWrites is the number of messages ever stored in the KV buckets (every put, update,
// create and delete marker; each one fsynced with sync_interval: always).
func kvWrites(t testing.TB, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx := context.Background()
	var n uint64
	lister := js.ListStreams(ctx)
	for si := range lister.Info() {
		if strings.HasPrefix(si.Config.Name, "KV_") && si.Config.Name != "KV_FLOOR" {
			n += si.State.LastSeq
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sent is how many messages conns have published (requests included).
func sent(conns ...*nats.Conn) uint64 {
	var n uint64
	for _, c := range conns {
		n += c.Stats().OutMsgs
	}
	return n
}

// floor is one event's irreducible durable work on the pipeline's own server and database:
// a JetStream publish with its ack, a pull of that message and its acknowledgement
// (confirmed by the server, as the worker's), one KV compare-and-swap and one SQL
// transaction appending a row.
type floor struct {
	js   jetstream.JetStream
	cons jetstream.Consumer
	kv   jetstream.KeyValue
	db   *gorm.DB
	rev  uint64
	seq  int
}

func newFloor(t testing.TB, js jetstream.JetStream, db *gorm.DB) *floor {
	t.Helper()
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor.>"},
		Storage: jetstream.FileStorage, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "FLOOR", jetstream.ConsumerConfig{Durable: "floor", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "FLOOR", Storage: jetstream.FileStorage, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "agent", []byte(`{"owner":""}`))
	if err != nil {
		t.Fatal(err)
	}
	return &floor{js: js, cons: cons, kv: kv, db: db, rev: rev}
}

// floorPayload is about the size of a completed event.
var floorPayload = []byte(`{"eventId":"floor","agentId":1,"conversationId":"c1","userMessage":"how should we plan the release?",` +
	`"assistantReply":"start with the checklist.","messageCount":4,"triggerSource":"web","timestamp":"2026-12-01T00:00:00Z"}`)

// event does one event's floor work.
func (f *floor) event(ctx context.Context) error {
	f.seq++
	id := fmt.Sprintf("floor-%d-%d", time.Now().UnixNano(), f.seq)
	if _, err := f.js.Publish(ctx, "floor.1", floorPayload, jetstream.WithMsgID(id)); err != nil {
		return err
	}
	batch, err := f.cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return err
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		if err := msg.DoubleAck(ctx); err != nil {
			return err
		}
	}
	if got != 1 {
		return fmt.Errorf("floor: fetched %d messages, want 1", got)
	}
	rev, err := f.kv.Update(ctx, "agent", []byte(`{"owner":"floor","until":"`+id+`"}`), f.rev)
	if err != nil {
		return err
	}
	f.rev = rev
	return f.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Create(&store.AppliedEffect{Key: id, CreateTime: time.Now().UTC()}).Error
	})
}

// budget is what one handling of an event may cost.
type budget struct {
	sql, kvOps, kvWrites, ledgerRows int
}

// TestPerEventBudget counts, for each kind of handling, the SQL statements, the KV
// operations, the fsynced KV writes and the ledger rows one event costs, and fails if any
// grows (or shrinks: then lower the budget here and in docs/benchmarks.md).
func TestPerEventBudget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		sqlc := &sqlCounter{keep: true}
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake), withSQLCounter(sqlc), withSettings(func(s *Settings) { s.Memory.CooldownMinutes = 5 }))
		svc, snc := h.serviceConn("w1")
		// An extraction without a cooldown, by another worker, leaves agent 3 a record to
		// come back to.
		h.set.Memory.CooldownMinutes = 0
		noCooldown := h.service("w0")
		ctx := context.Background()
		for _, a := range []int64{1, 3} {
			if _, err := h.ws.EnsureAgent(ctx, a); err != nil {
				t.Fatal(err)
			}
			for c := 1; c <= 4; c++ {
				h.conversation(a, fmt.Sprintf("c%d", c), fmt.Sprintf("t%d-%d", a, c), 4)
			}
		}
		if res := noCooldown.Handle(ctx, JobFromEvent(completed(3, "c1", "e-3-1", 4))); res.Status != store.RunCompleted {
			t.Fatalf("setup: %s %s", res.Status, res.Reason)
		}
		redelivered := func(e *event.ConversationCompletedEvent) Job {
			j := JobFromEvent(e)
			j.Attempt = 2
			return j
		}
		for _, c := range []struct {
			name  string
			job   Job
			want  budget
			check func(Result) bool
		}{
			{"first extraction of an agent", JobFromEvent(completed(1, "c1", "e-1-1", 4)), budget{sql: 10, kvOps: 3, kvWrites: 2, ledgerRows: 1},
				func(r Result) bool { return r.Status == store.RunCompleted && len(r.FilesChanged) == 1 }},
			{"extraction of a returning agent", JobFromEvent(completed(3, "c2", "e-3-2", 4)), budget{sql: 12, kvOps: 3, kvWrites: 2, ledgerRows: 1},
				func(r Result) bool { return r.Status == store.RunCompleted && len(r.FilesChanged) == 1 }},
			{"cooldown deferral, first delivery: the waiter", JobFromEvent(completed(3, "c3", "e-3-3", 4)), budget{sql: 2, kvOps: 2, kvWrites: 1},
				func(r Result) bool { return r.Deferral == "cooldown" && r.Retry }},
			{"cooldown deferral, redelivery", redelivered(completed(3, "c3", "e-3-3", 4)), budget{kvOps: 1},
				func(r Result) bool { return r.Deferral == "cooldown" && r.Retry }},
			{"cooldown, another event: acknowledged into the coming extraction", JobFromEvent(completed(3, "c4", "e-3-4", 4)), budget{sql: 2, kvOps: 2, kvWrites: 1},
				func(r Result) bool { return r.Deferral == deferralCoalesced && !r.Retry }},
		} {
			var rows0 int64
			h.db.DB.Model(&store.MemoryRun{}).Count(&rows0)
			sqlc.statements()
			stmts, ops, writes := sqlc.n.Load(), sent(snc), kvWrites(t, h.js)
			res := svc.Handle(ctx, c.job)
			got := budget{sql: int(sqlc.n.Load() - stmts), kvOps: int(sent(snc) - ops), kvWrites: int(kvWrites(t, h.js) - writes)}
			log := sqlc.statements()
			var rows1 int64
			h.db.DB.Model(&store.MemoryRun{}).Count(&rows1)
			got.ledgerRows = int(rows1 - rows0)
			if !c.check(res) {
				t.Fatalf("%s: unexpected result %s %q (%s)", c.name, res.Status, res.Reason, res.Deferral)
			}
			if got != c.want {
				t.Errorf("%s: cost %+v, budget %+v; statements:\n%s", c.name, got, c.want, strings.Join(log, "\n"))
			}
		}
	})
}
