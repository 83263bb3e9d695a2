package recall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Subjects, stream and consumer of the indexer (docs/recall.md; the catalogue is bus's).
const (
	// SubjectIndex carries "a file of this agent changed": mate.recall.index.<agentId>.
	SubjectIndex = bus.SubjectRecallIndex
	// SubjectIndexed (core NATS, not stored) says the indexer committed new chunks of an
	// agent: every API replica drops its cached snapshot of that agent.
	SubjectIndexed = bus.SubjectRecallIndexed
	// Stream holds SubjectIndex.>.
	Stream = bus.StreamRecall
	// Consumer is the indexers' shared durable pull consumer.
	Consumer = bus.ConsumerRecall
)

// Change is the payload of an index message.
type Change struct {
	AgentID  int64  `json:"agentId"`
	Filename string `json:"filename"`
	// Version is the file version the change produced (informational: the indexer always
	// indexes the file's current state).
	Version int64 `json:"version"`
}

// StreamConfig is MATE_RECALL (bus.RecallStreamConfig).
func StreamConfig(replicas int) jetstream.StreamConfig { return bus.RecallStreamConfig(replicas) }

// ConsumerConfig is the indexers' durable consumer (bus.RecallConsumerConfig).
func ConsumerConfig(ackWait time.Duration, maxDeliver int) jetstream.ConsumerConfig {
	return bus.RecallConsumerConfig(ackWait, maxDeliver)
}

// Provision creates MATE_RECALL and the durable consumer (idempotent).
func Provision(ctx context.Context, js jetstream.JetStream, replicas int, ackWait time.Duration, maxDeliver int) error {
	if _, err := bus.EnsureStream(ctx, js, StreamConfig(replicas)); err != nil {
		return err
	}
	_, err := bus.EnsureConsumer(ctx, js, Stream, ConsumerConfig(ackWait, maxDeliver))
	return err
}

// Notifier publishes index messages after a workspace change committed. It never blocks a
// write: a core-NATS publish is buffered by the client; if it is lost (connection down),
// the reconciler finds the change by its update time.
type Notifier struct {
	nc  *nats.Conn
	log *slog.Logger
}

// NewNotifier builds a notifier on its own connection.
func NewNotifier(nc *nats.Conn, log *slog.Logger) *Notifier { return &Notifier{nc: nc, log: log} }

// Changed is a workspace.ChangeHook.
func (n *Notifier) Changed(_ context.Context, agentID int64, filename string, version int64) {
	data, _ := json.Marshal(Change{AgentID: agentID, Filename: filename, Version: version})
	if err := n.nc.Publish(bus.AgentSubject(SubjectIndex, agentID), data); err != nil {
		n.log.Warn("recall: index message not published; the reconciler will pick the change up", "agent", agentID, "file", filename, "err", err)
	}
}

// Worker consumes index messages and runs the reconciler.
type Worker struct {
	js    jetstream.JetStream
	nc    *nats.Conn
	db    *gorm.DB
	ix    *Indexer
	log   *slog.Logger
	every time.Duration
	slack time.Duration
	conc  int
	now   func() time.Time
	mu    sync.Mutex
	rt    *bus.Runtime[Change]
	// conversations: stored conversations are a search source too.
	conversations bool
	stop          chan struct{}
	wg            sync.WaitGroup
	processed     func(Change, SyncResult, error)
	guard         *panics.Guard
}

// WorkerOption configures a Worker.
type WorkerOption func(*Worker)

// WorkerWithConversations makes the reconciler also index conversations with new stored
// messages (mate.memory.search.sources: conversations).
func WorkerWithConversations() WorkerOption { return func(w *Worker) { w.conversations = true } }

// WorkerWithGuard recovers, logs and counts a panic while files are indexed (the messages
// are then retried with backoff); without it a guard logs to the worker's logger.
func WorkerWithGuard(g *panics.Guard) WorkerOption { return func(w *Worker) { w.guard = g } }

// WorkerWithObserver calls fn after each message (tests, metrics).
func WorkerWithObserver(fn func(Change, SyncResult, error)) WorkerOption {
	return func(w *Worker) { w.processed = fn }
}

// NewWorker builds a worker; the stream and consumer must be provisioned.
func NewWorker(js jetstream.JetStream, nc *nats.Conn, db *gorm.DB, ix *Indexer, log *slog.Logger, reconcileEvery time.Duration, opts ...WorkerOption) *Worker {
	if reconcileEvery <= 0 {
		reconcileEvery = Defaults().ReconcileInterval
	}
	w := &Worker{js: js, nc: nc, db: db, ix: ix, log: log, every: reconcileEvery, slack: 5 * time.Minute, conc: 8, now: time.Now}
	for _, o := range opts {
		o(w)
	}
	if w.guard == nil {
		w.guard = panics.New(log, nil)
	}
	return w
}

// Start reconciles once in the background, then consumes messages (a keyed handler on the
// message runtime, bus.Runtime) and reconciles every interval until Stop.
//
// Each agent's messages are handled by one batch at a time: messages about an agent that
// arrive while its files are being indexed (the core files seeded together, a daily note
// appended twice) wait and are indexed together in its next round, with one read of the
// index state, one transaction and one generation bump, instead of racing each other for
// the agent's generation row.
func (w *Worker) Start(ctx context.Context) error {
	rt, err := bus.Bind(ctx, w.js.Conn(), Stream, Consumer, bus.Handler[Change]{
		Decode:      decodeChange,
		Key:         func(c Change) string { return strconv.FormatInt(c.AgentID, 10) },
		HandleBatch: w.process,
		Where:       "recall.index",
		Attrs:       func(c Change) []any { return []any{"agent", c.AgentID, "file", c.Filename} },
		Finished:    w.finished,
	}, bus.WithLogger(w.log), bus.WithGuard(w.guard), bus.WithConcurrency(w.conc), bus.WithBackoff(retryBackoff),
		// The reconciler is the backstop after the last delivery, not the dead-letter stream.
		bus.WithoutAdvisory())
	if err != nil {
		return err
	}
	if err := rt.Start(); err != nil {
		return err
	}
	w.mu.Lock()
	w.rt, w.stop = rt, make(chan struct{})
	w.mu.Unlock()
	w.wg.Add(1)
	go w.reconcileLoop(w.stop)
	return nil
}

// retryBackoff is the delay of a redelivery after a failed index: 2 s doubling to a minute.
var retryBackoff = bus.Backoff{Initial: 2 * time.Second, Max: time.Minute}

// Stop stops consuming (messages in progress are handed back), and waits for the reconciler.
func (w *Worker) Stop() {
	w.mu.Lock()
	rt, stop := w.rt, w.stop
	w.rt = nil
	w.mu.Unlock()
	if rt == nil {
		return
	}
	close(stop)
	rt.Stop()
	w.wg.Wait()
}

var indexSubject = regexp.MustCompile(`^` + regexp.QuoteMeta(SubjectIndex) + `\.([1-9][0-9]*)$`)

func decodeChange(msg jetstream.Msg) (Change, error) {
	var c Change
	m := indexSubject.FindStringSubmatch(msg.Subject())
	if m == nil {
		return c, fmt.Errorf("subject %s is not %s.<agentId>", msg.Subject(), SubjectIndex)
	}
	if err := json.Unmarshal(msg.Data(), &c); err != nil {
		return c, fmt.Errorf("undecodable index message: %v", err)
	}
	if strconv.FormatInt(c.AgentID, 10) != m[1] || c.Filename == "" {
		return c, fmt.Errorf("index message for agent %d file %q published on %s", c.AgentID, c.Filename, msg.Subject())
	}
	return c, nil
}

// indexed is what indexing a delivery's file gave, for the observer.
type indexed struct {
	res SyncResult
	err error
}

// process indexes the files a batch of one agent's messages names: all acknowledged, or
// all retried with backoff (a database down or the like; the reconciler is the backstop
// after the last delivery).
func (w *Worker) process(ctx context.Context, batch []*bus.Delivery[Change]) []bus.Outcome {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	agentID := batch[0].Value.AgentID
	var names []string
	seen := map[string]bool{}
	for _, d := range batch {
		if !seen[d.Value.Filename] {
			seen[d.Value.Filename] = true
			names = append(names, d.Value.Filename)
		}
	}
	res, err := w.ix.SyncFiles(ctx, agentID, names)
	outs := make([]bus.Outcome, len(batch))
	changed := false
	for i, d := range batch {
		r := res[d.Value.Filename]
		changed = changed || r.Changed()
		outs[i] = bus.OutcomeOf(err, d.Attempt, retryBackoff).WithDetail(indexed{r, err})
		if err != nil {
			w.log.Warn("recall: index failed; retrying", "agent", agentID, "file", d.Value.Filename, "attempt", d.Attempt, "err", err)
		}
	}
	if err == nil && changed {
		w.announce(agentID)
	}
	return outs
}

// finished reports a delivery to the observer.
func (w *Worker) finished(d *bus.Delivery[Change], o bus.Outcome) {
	if w.processed == nil {
		return
	}
	x, ok := o.Detail.(indexed)
	if !ok {
		// The runtime decided without the handler (a panic): retried with backoff.
		x.err = errors.New(o.Reason)
	}
	w.processed(d.Value, x.res, x.err)
}

// announce tells every replica's searcher that the agent's chunks changed.
func (w *Worker) announce(agentID int64) {
	if err := w.nc.Publish(bus.AgentSubject(SubjectIndexed, agentID), nil); err != nil {
		w.log.Debug("recall: indexed notice not sent (searchers check the generation anyway)", "err", err)
	}
}

func (w *Worker) reconcileLoop(stop chan struct{}) {
	defer w.wg.Done()
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		var err error
		if perr := w.guard.Do("recall.reconcile", func() { _, err = w.Reconcile(ctx) }); perr != nil {
			err = perr
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("recall: reconcile", "err", err)
		}
		cancel()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

const cursorName = "workspace"

// ReconcileReport says what one sweep did.
type ReconcileReport struct {
	Checked, Changed int
}

// Reconcile syncs every file changed since its watermark (sweep), every conversation with new
// messages when conversations are a source, and every file whose embeddings are pending.
func (w *Worker) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	err := w.sweep(ctx, cursorName, &rep, func(db *gorm.DB, t time.Time, id int64) ([]sweepRow, error) {
		var rows []store.WorkspaceFile
		if err := db.Select("id", "agent_id", "filename", "update_time").
			Where("update_time > ? OR (update_time = ? AND id > ?)", t, t, id).
			Order("update_time, id").Limit(sweepPage).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("scan workspace files: %w", err)
		}
		out := make([]sweepRow, len(rows))
		for i, r := range rows {
			out[i] = sweepRow{id: r.ID, agentID: r.AgentID, name: r.Filename, at: r.UpdateTime}
		}
		return out, nil
	})
	if err != nil {
		return rep, err
	}
	if w.conversations {
		// Conversations with new messages (any path: the REST route, an event's inline
		// messages), from their own watermark over mate_message.create_time.
		err := w.sweep(ctx, conversationsCursor, &rep, func(db *gorm.DB, t time.Time, id int64) ([]sweepRow, error) {
			rows, err := conversation.New(db).StoredAfter(ctx, t, id, sweepPage)
			if err != nil {
				return nil, err
			}
			out := make([]sweepRow, len(rows))
			for i, r := range rows {
				out[i] = sweepRow{id: r.ID, agentID: r.AgentID, name: ConversationPrefix + r.ConversationID, at: r.CreateTime}
			}
			return out, nil
		})
		if err != nil {
			return rep, err
		}
	}
	db := w.db.WithContext(ctx)
	var pending []store.RecallFile
	if err := db.Where("embed_pending = ?", true).Limit(200).Find(&pending).Error; err != nil {
		return rep, fmt.Errorf("scan pending embeddings: %w", err)
	}
	for _, p := range pending {
		if err := w.syncOne(ctx, p.AgentID, p.Filename, &rep); err != nil {
			return rep, err
		}
	}
	// Files indexed by an older version (an older chunking or term analysis): built again,
	// a page per sweep, batched per agent.
	var stale []store.RecallFile
	if err := db.Select("agent_id", "filename").Where("format < ?", IndexFormat).Order("agent_id, filename").
		Limit(sweepPage).Find(&stale).Error; err != nil {
		return rep, fmt.Errorf("scan files of an older index format: %w", err)
	}
	for start := 0; start < len(stale); {
		end := start
		for end < len(stale) && stale[end].AgentID == stale[start].AgentID {
			end++
		}
		names := make([]string, 0, end-start)
		for _, f := range stale[start:end] {
			names = append(names, f.Filename)
		}
		if err := w.syncFiles(ctx, stale[start].AgentID, names, &rep); err != nil {
			return rep, err
		}
		start = end
	}
	return rep, nil
}

func (w *Worker) syncFiles(ctx context.Context, agentID int64, filenames []string, rep *ReconcileReport) error {
	rep.Checked += len(filenames)
	res, err := w.ix.SyncFiles(ctx, agentID, filenames)
	if err != nil {
		return err
	}
	changed := false
	for _, r := range res {
		if r.Changed() {
			rep.Changed++
			changed = true
		}
	}
	if changed {
		w.announce(agentID)
	}
	return nil
}

func (w *Worker) syncOne(ctx context.Context, agentID int64, filename string, rep *ReconcileReport) error {
	rep.Checked++
	res, err := w.ix.Sync(ctx, agentID, filename)
	if err != nil {
		return err
	}
	if res.Changed() {
		rep.Changed++
		w.announce(agentID)
	}
	return nil
}

// Subscribe refreshes a searcher's cached agent in the background whenever an indexer
// announces new chunks of it (only the changed files are read again), so the next search on
// this replica is warm. A missed notice costs nothing but that: searches compare the
// generation with the database anyway.
func Subscribe(nc *nats.Conn, s *Searcher) (*nats.Subscription, error) {
	return nc.Subscribe(SubjectIndexed+".*", func(m *nats.Msg) {
		if id, err := strconv.ParseInt(m.Subject[len(SubjectIndexed)+1:], 10, 64); err == nil {
			s.Refresh(id)
		}
	})
}

// conversationsCursor is the reconciler's watermark over mate_message.create_time.
const conversationsCursor = "conversations"

// sweepPage is how many rows a sweep reads at a time.
const sweepPage = 500

// sweepRow is one changed row a sweep found: what to index, and where the watermark is.
type sweepRow struct {
	id      int64
	agentID int64
	name    string
	at      time.Time
}

// sweep syncs every (agent, name) that page reports changed since the named watermark (minus
// the slack for clock skew between writers), page after page in (time, id) order, then moves
// the watermark. It is what makes a lost index message (a crash between commit and publish,
// a connection down) cost a delay, never a missed update.
func (w *Worker) sweep(ctx context.Context, cursor string, rep *ReconcileReport, page func(db *gorm.DB, t time.Time, id int64) ([]sweepRow, error)) error {
	db := w.db.WithContext(ctx)
	var cur store.RecallCursor
	if err := db.Where("name = ?", cursor).Take(&cur).Error; err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("read recall cursor %s: %w", cursor, err)
	}
	lastTime := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // before any row; MySQL dates start at 1000
	if !cur.UpdateTime.IsZero() {
		lastTime = cur.UpdateTime.Add(-w.slack)
	}
	high := cur.UpdateTime
	type key struct {
		agentID int64
		name    string
	}
	seen := map[key]bool{}
	var lastID int64
	for {
		rows, err := page(db, lastTime, lastID)
		if err != nil {
			return err
		}
		// The page's names grouped by agent: one SyncFiles (two reads, one transaction)
		// per agent instead of one Sync per file.
		var agents []int64
		names := map[int64][]string{}
		for _, r := range rows {
			if k := (key{r.agentID, r.name}); !seen[k] {
				seen[k] = true
				if names[r.agentID] == nil {
					agents = append(agents, r.agentID)
				}
				names[r.agentID] = append(names[r.agentID], r.name)
			}
			lastTime, lastID = r.at, r.id
			if r.at.After(high) {
				high = r.at
			}
		}
		for _, a := range agents {
			if err := w.syncFiles(ctx, a, names[a], rep); err != nil {
				return err
			}
		}
		if len(rows) < sweepPage {
			break
		}
	}
	if high.After(cur.UpdateTime) {
		if err := db.Save(&store.RecallCursor{Name: cursor, UpdateTime: high}).Error; err != nil {
			return fmt.Errorf("store recall cursor %s: %w", cursor, err)
		}
	}
	return nil
}
