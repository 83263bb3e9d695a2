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

	"github.com/matememory/matememory/pkg/store"
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
