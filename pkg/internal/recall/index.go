package recall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/recall/chunk"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Indexer keeps the chunks of agents' files in step with the files. Sync is idempotent and
// safe to run concurrently (a compare-and-swap on mate_recall_file decides who commits).
type Indexer struct {
	db *gorm.DB
	// msgs reads the conversations indexed as a search source.
	msgs *conversation.Store
	emb  embed.Embedder // nil: lexical only
	an   *lexical.Analyzer
	set  Settings
	now  func() time.Time
	log  *slog.Logger
	// terms remembers the lexical terms of recently indexed chunk texts by their hash: the
	// unchanged chunks of a daily note that grew, and the seeded core files every agent
	// starts with, are not analyzed again.
	terms *termsMemo
}

// IndexerOption configures an Indexer.
type IndexerOption func(*Indexer)

// WithEmbedder sets the embedding endpoint (none: lexical only).
func WithEmbedder(e embed.Embedder) IndexerOption { return func(i *Indexer) { i.emb = e } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) IndexerOption { return func(i *Indexer) { i.now = now } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) IndexerOption { return func(i *Indexer) { i.log = l } }

// NewIndexer builds an indexer.
func NewIndexer(db *gorm.DB, an *lexical.Analyzer, set Settings, opts ...IndexerOption) *Indexer {
	i := &Indexer{db: db, msgs: conversation.New(db), an: an, set: set.withDefaults(), now: time.Now, log: slog.Default(), terms: newTermsMemo(termsMemoSize)}
	for _, o := range opts {
		o(i)
	}
	return i
}

// Outcome is what Sync did.
type Outcome string

// Outcomes of Sync.
const (
	Unchanged Outcome = "unchanged"
	Indexed   Outcome = "indexed"
	Removed   Outcome = "removed"
	Embedded  Outcome = "embedded" // only missing embeddings were added
)

// SyncResult reports one Sync.
type SyncResult struct {
	Outcome Outcome
	Chunks  int
	// EmbeddedTexts is how many texts were sent to the embedding endpoint.
	EmbeddedTexts int
	// EmbedPending is true when the endpoint failed: the chunks are searchable lexically
	// and will be embedded by a later Sync.
	EmbedPending bool
}

// Changed reports whether searches may see something new.
func (r SyncResult) Changed() bool { return r.Outcome != Unchanged }

const maxSyncAttempts = 10

// Sync brings the chunks of one file of an agent up to date with its live row: re-chunks it
// if its version moved, removes its chunks if it is gone, and embeds chunks whose hash has
// no vector for the model yet.
func (i *Indexer) Sync(ctx context.Context, agentID int64, filename string) (SyncResult, error) {
	for attempt := 0; ; attempt++ {
		r, err := i.syncOnce(ctx, agentID, filename)
		if (errors.Is(err, errLostRace) || store.IsDeadlock(err)) && attempt < maxSyncAttempts {
			// Another indexer of the same agent committed first, or MySQL broke a deadlock
			// between two of them (gap locks on the agent's chunks): nothing of this attempt
			// was applied; read the state again.
			time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
			continue
		}
		return r, err
	}
}

var errLostRace = errors.New("recall: another indexer committed first")

func (i *Indexer) syncOnce(ctx context.Context, agentID int64, filename string) (SyncResult, error) {
	db := i.db.WithContext(ctx)
	rec, hasRec, f, exists, err := i.loadWithState(ctx, db, agentID, filename)
	if err != nil {
		return SyncResult{}, err
	}
	if !exists {
		if !hasRec {
			return SyncResult{Outcome: Unchanged}, nil
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			res := tx.Where("agent_id = ? AND filename = ? AND file_id = ? AND version = ?", agentID, filename, rec.FileID, rec.Version).Delete(&store.RecallFile{})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return errLostRace
			}
			if err := tx.Where("agent_id = ? AND filename = ?", agentID, filename).Delete(&store.RecallChunk{}).Error; err != nil {
				return err
			}
			return bumpGeneration(tx, agentID)
		})
		if err != nil {
			return SyncResult{}, wrapSync(err, agentID, filename)
		}
		return SyncResult{Outcome: Removed}, nil
	}
	if current(rec, hasRec, f) {
		if !rec.EmbedPending || i.emb == nil {
			return SyncResult{Outcome: Unchanged, Chunks: rec.Chunks}, nil
		}
		return i.embedPending(ctx, rec)
	}

	rows, res, err := i.prepare(ctx, agentID, filename, f)
	if err != nil {
		return SyncResult{}, err
	}
	if err := i.commit(db, agentID, []staged{{name: filename, rec: rec, hasRec: hasRec, f: f, rows: rows, res: res}}); err != nil {
		return SyncResult{}, wrapSync(err, agentID, filename)
	}
	return res, nil
}

// IndexFormat is the version of what the indexer stores for a chunk: its cut (chunk.Split)
// and its terms (lexical.Analyzer). Bump it when either changes: files indexed with an
// older format are indexed again by the reconciler (embeddings are kept, by text hash), and
// searches compare it per file, so a snapshot never mixes terms of two formats unnoticed.
// A newer format's rows are left alone by an older version during a rolling update.
//
//	1: hyphenated compounds also as one word (Wi-Fi → wifi), issue 19's chunking.
//	2: no stop words removed (go, it, the are terms; a query weighs function words down).
const IndexFormat = 2

// current reports whether the index state rec (when hasRec) is of live file f as it is now,
// in this format or a newer one.
func current(rec store.RecallFile, hasRec bool, f store.WorkspaceFile) bool {
	return hasRec && rec.FileID == f.ID && rec.Version == f.Version && rec.Format >= IndexFormat
}

// staged is a file of an agent chunked and ready to commit.
type staged struct {
	name   string
	rec    store.RecallFile // the index state read before chunking (when hasRec)
	hasRec bool
	f      store.WorkspaceFile
	rows   []store.RecallChunk
	res    SyncResult
}

// commit replaces the chunks of the staged files of one agent in one transaction: each
// file's index state moves by compare-and-swap from the state read before chunking (a lost
// race, errLostRace, applies nothing), and the agent's generation is bumped once.
func (i *Indexer) commit(db *gorm.DB, agentID int64, files []staged) error {
	return db.Transaction(func(tx *gorm.DB) error {
		now := i.now().UTC()
		var created []store.RecallFile
		names := make([]string, 0, len(files))
		var rows []store.RecallChunk
		for _, s := range files {
			next := store.RecallFile{AgentID: agentID, Filename: s.name, FileID: s.f.ID, Version: s.f.Version,
				Chunks: len(s.rows), EmbedPending: s.res.EmbedPending, IndexTime: now, Format: IndexFormat}
			names = append(names, s.name)
			rows = append(rows, s.rows...)
			if !s.hasRec {
				created = append(created, next)
				continue
			}
			upd := tx.Model(&store.RecallFile{}).
				Where("agent_id = ? AND filename = ? AND file_id = ? AND version = ?", agentID, s.name, s.rec.FileID, s.rec.Version).
				Updates(map[string]any{"file_id": next.FileID, "version": next.Version, "chunks": next.Chunks,
					"embed_pending": next.EmbedPending, "index_time": next.IndexTime, "format": next.Format})
			if upd.Error != nil {
				return upd.Error
			}
			if upd.RowsAffected != 1 {
				return errLostRace
			}
		}
		if len(created) > 0 {
			if err := tx.Create(&created).Error; err != nil {
				if store.IsDuplicate(err) {
					return errLostRace
				}
				return err
			}
		}
		if err := tx.Where("agent_id = ? AND filename IN ?", agentID, names).Delete(&store.RecallChunk{}).Error; err != nil {
			return err
		}
		if len(rows) > 0 {
			if err := tx.CreateInBatches(rows, 200).Error; err != nil {
				return err
			}
		}
		return bumpGeneration(tx, agentID)
	})
}

// SyncFiles is Sync for several files of one agent, e.g. the core files seeded together or
// the files an index message batch names: the index states and the live files are read
// with one query each, the files that need chunking are committed in one transaction with
// one generation bump. Removals, pending embeddings and conversations go through Sync.
// It returns each file's result.
func (i *Indexer) SyncFiles(ctx context.Context, agentID int64, filenames []string) (map[string]SyncResult, error) {
	if len(filenames) == 1 {
		r, err := i.Sync(ctx, agentID, filenames[0])
		return map[string]SyncResult{filenames[0]: r}, err
	}
	for attempt := 0; ; attempt++ {
		out, err := i.syncFilesOnce(ctx, agentID, filenames)
		if (errors.Is(err, errLostRace) || store.IsDeadlock(err)) && attempt < maxSyncAttempts {
			time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
			continue
		}
		return out, err
	}
}

func (i *Indexer) syncFilesOnce(ctx context.Context, agentID int64, filenames []string) (map[string]SyncResult, error) {
	db := i.db.WithContext(ctx)
	var files, single []string
	for _, n := range filenames {
		if IsConversation(n) {
			single = append(single, n)
		} else {
			files = append(files, n)
		}
	}
	out := make(map[string]SyncResult, len(filenames))
	if len(files) > 0 {
		var recs []store.RecallFile
		if err := db.Where("agent_id = ? AND filename IN ?", agentID, files).Find(&recs).Error; err != nil {
			return nil, fmt.Errorf("read index state of %d files of agent %d: %w", len(files), agentID, err)
		}
		var live []store.WorkspaceFile
		if err := db.Where("agent_id = ? AND filename IN ? AND deleted = 0", agentID, files).Find(&live).Error; err != nil {
			return nil, fmt.Errorf("read %d files of agent %d: %w", len(files), agentID, err)
		}
		recOf := make(map[string]store.RecallFile, len(recs))
		for _, r := range recs {
			recOf[r.Filename] = r
		}
		liveOf := make(map[string]store.WorkspaceFile, len(live))
		for _, f := range live {
			liveOf[f.Filename] = f // by the exact name, as load compares it
		}
		var batch []staged
		for _, n := range files {
			rec, hasRec := recOf[n]
			f, exists := liveOf[n]
			switch {
			case !exists && !hasRec:
				out[n] = SyncResult{Outcome: Unchanged}
			case !exists || (rec.EmbedPending && i.emb != nil && current(rec, hasRec, f)):
				single = append(single, n) // a removal, or missing embeddings only
			case current(rec, hasRec, f):
				out[n] = SyncResult{Outcome: Unchanged, Chunks: rec.Chunks}
			default:
				rows, res, err := i.prepare(ctx, agentID, n, f)
				if err != nil {
					return nil, err
				}
				batch = append(batch, staged{name: n, rec: rec, hasRec: hasRec, f: f, rows: rows, res: res})
				out[n] = res
			}
		}
		if len(batch) > 0 {
			if err := i.commit(db, agentID, batch); err != nil {
				return nil, wrapSync(err, agentID, fmt.Sprintf("%d files", len(batch)))
			}
		}
	}
	for _, n := range single {
		r, err := i.Sync(ctx, agentID, n)
		if err != nil {
			return out, err
		}
		out[n] = r
	}
	return out, nil
}

// prepare chunks a file's content into rows and embeds the chunks that have no vector yet.
func (i *Indexer) prepare(ctx context.Context, agentID int64, filename string, f store.WorkspaceFile) ([]store.RecallChunk, SyncResult, error) {
	chunks := chunk.Split(f.Content, chunk.Options{MaxTokens: i.set.ChunkTokens, OverlapTokens: i.set.OverlapTokens})
	date, dated := chunk.NoteDate(filename, time.UTC)
	if !dated {
		date = f.UpdateTime.UTC()
	}
	if IsConversation(filename) {
		// A conversation is dated by its last message: it decays like a daily note.
		dated = true
	}
	rows := make([]store.RecallChunk, len(chunks))
	hashes := make([]string, len(chunks))
	texts := make(map[string]string, len(chunks))
	for k, c := range chunks {
		text := c.Embeddable()
		noteDate, noteDated := date, dated
		if archive.IsArchive(filename) {
			// An archive block is dated by its heading (when its entries were demoted): it
			// decays like the daily notes of that day, not like an undated core file.
			if d, ok := archive.DateOf(c.Heading, time.UTC); ok {
				noteDate, noteDated = d, true
			}
		}
		rows[k] = store.RecallChunk{AgentID: agentID, Filename: filename, Ordinal: c.Ordinal,
			StartLine: c.StartLine, EndLine: c.EndLine, Heading: truncate(c.Heading, 500), Text: c.Text,
			Terms: i.terms.get(c.Hash, text, i.an), Hash: c.Hash, FileVersion: f.Version,
			NoteDate: noteDate, Dated: noteDated}
		hashes[k] = c.Hash
		texts[c.Hash] = text
	}
	res := SyncResult{Outcome: Indexed, Chunks: len(rows)}
	if i.emb != nil {
		n, err := i.ensureEmbeddings(ctx, hashes, texts)
		res.EmbeddedTexts = n
		if err != nil {
			if ctx.Err() != nil {
				return nil, SyncResult{}, err
			}
			i.log.Warn("recall: embedding failed; chunks are searchable lexically and will be embedded later",
				"agent", agentID, "file", filename, "err", err)
			res.EmbedPending = true
		}
	}
	return rows, res, nil
}

func wrapSync(err error, agentID int64, filename string) error {
	if errors.Is(err, errLostRace) {
		return err
	}
	return fmt.Errorf("index %s of agent %d: %w", filename, agentID, err)
}

// embedPending embeds the chunks of an indexed file that still lack a vector.
func (i *Indexer) embedPending(ctx context.Context, rec store.RecallFile) (SyncResult, error) {
	var rows []store.RecallChunk
	if err := i.db.WithContext(ctx).Select("hash", "text", "heading").
		Where("agent_id = ? AND filename = ?", rec.AgentID, rec.Filename).Find(&rows).Error; err != nil {
		return SyncResult{}, fmt.Errorf("read chunks of %s of agent %d: %w", rec.Filename, rec.AgentID, err)
	}
	hashes := make([]string, len(rows))
	texts := map[string]string{}
	for k, r := range rows {
		hashes[k] = r.Hash
		texts[r.Hash] = chunk.Chunk{Heading: r.Heading, Text: r.Text}.Embeddable()
	}
	n, err := i.ensureEmbeddings(ctx, hashes, texts)
	res := SyncResult{Outcome: Embedded, Chunks: len(rows), EmbeddedTexts: n}
	if err != nil {
		res.EmbedPending = true
		res.Outcome = Unchanged
		return res, nil
	}
	err = i.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		upd := tx.Model(&store.RecallFile{}).
			Where("agent_id = ? AND filename = ? AND file_id = ? AND version = ?", rec.AgentID, rec.Filename, rec.FileID, rec.Version).
			Update("embed_pending", false)
		if upd.Error != nil {
			return upd.Error
		}
		if upd.RowsAffected != 1 {
			return errLostRace
		}
		return bumpGeneration(tx, rec.AgentID)
	})
	if err != nil {
		return SyncResult{}, wrapSync(err, rec.AgentID, rec.Filename)
	}
	return res, nil
}

// ensureEmbeddings embeds the texts whose hash has no vector for the model, and stores them.
// It reports how many texts it sent.
func (i *Indexer) ensureEmbeddings(ctx context.Context, hashes []string, texts map[string]string) (int, error) {
	if len(hashes) == 0 {
		return 0, nil
	}
	model := i.emb.Model()
	have := map[string]bool{}
	for start := 0; start < len(hashes); start += 500 {
		end := min(start+500, len(hashes))
		var got []string
		if err := i.db.WithContext(ctx).Model(&store.RecallEmbedding{}).
			Where("model = ? AND hash IN ?", model, hashes[start:end]).Pluck("hash", &got).Error; err != nil {
			return 0, fmt.Errorf("read embedding cache: %w", err)
		}
		for _, h := range got {
			have[h] = true
		}
	}
	var missing []string
	var input []string
	for _, h := range hashes {
		if !have[h] {
			have[h] = true // once per hash
			missing = append(missing, h)
			input = append(input, texts[h])
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	vecs, err := i.emb.Embed(ctx, input)
	if err != nil {
		return len(input), err
	}
	now := i.now().UTC()
	rows := make([]store.RecallEmbedding, len(missing))
	for k, h := range missing {
		rows[k] = store.RecallEmbedding{Model: model, Hash: h, Dims: len(vecs[k]), Vector: embed.Encode(vecs[k]), CreateTime: now}
	}
	// Another indexer may have stored the same hash meanwhile: same text, same vector.
	if err := i.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 100).Error; err != nil {
		return len(input), fmt.Errorf("store embeddings: %w", err)
	}
	return len(input), nil
}

func bumpGeneration(tx *gorm.DB, agentID int64) error {
	res := tx.Model(&store.RecallAgent{}).Where("agent_id = ?", agentID).UpdateColumn("generation", gorm.Expr("generation + 1"))
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		err := tx.Create(&store.RecallAgent{AgentID: agentID, Generation: 1}).Error
		if store.IsDuplicate(err) {
			return errLostRace
		}
		return err
	}
	return nil
}

// termsMemoSize bounds the terms memo: about this many chunk texts' terms, twice at most.
const termsMemoSize = 4096

// termsMemo maps a chunk's hash (of its embeddable text) to its joined lexical terms. It
// keeps two generations: when the current one is full it becomes the previous one, so
// recently used entries survive and memory stays bounded.
type termsMemo struct {
	mu        sync.Mutex
	max       int
	cur, prev map[string]string
}

func newTermsMemo(max int) *termsMemo {
	return &termsMemo{max: max, cur: map[string]string{}}
}

// get returns the joined terms of text, whose hash is hash.
func (m *termsMemo) get(hash, text string, an *lexical.Analyzer) string {
	m.mu.Lock()
	t, ok := m.cur[hash]
	if !ok {
		t, ok = m.prev[hash]
	}
	m.mu.Unlock()
	if !ok {
		t = lexical.JoinTerms(an.Terms(text))
	}
	m.mu.Lock()
	if _, in := m.cur[hash]; !in {
		if len(m.cur) >= m.max {
			m.prev, m.cur = m.cur, make(map[string]string, m.max)
		}
		m.cur[hash] = t
	}
	m.mu.Unlock()
	return t
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

// ConversationPrefix names a conversation indexed as a search source
// ("conversation:<conversationId>", mate.memory.search.sources: conversations). No workspace
// file can have such a name: workspace names end in .md, and this prefix is checked first.
const ConversationPrefix = "conversation:"

// IsConversation reports whether an indexed name is a conversation, not a workspace file.
func IsConversation(name string) bool { return strings.HasPrefix(name, ConversationPrefix) }

// loadWithState reads the index state of name (rec, when hasRec) and what name stands for
// (f, when exists; see load). A live workspace file and its state are read in one statement
// (every extraction's daily note comes here: issue 32); a conversation, or a file that is
// gone, reads its state on its own.
func (i *Indexer) loadWithState(ctx context.Context, db *gorm.DB, agentID int64, name string) (rec store.RecallFile, hasRec bool, f store.WorkspaceFile, exists bool, err error) {
	if !IsConversation(name) {
		var rows []fileWithState
		if err := db.Raw("SELECT f.*, r.agent_id IS NOT NULL AS rec_found, COALESCE(r.file_id, 0) AS rec_file_id, "+
			"COALESCE(r.version, 0) AS rec_version, COALESCE(r.chunks, 0) AS rec_chunks, "+
			"COALESCE(r.embed_pending, 0) AS rec_embed_pending, COALESCE(r.format, 0) AS rec_format "+
			"FROM mate_workspace_file f LEFT JOIN mate_recall_file r ON r.agent_id = f.agent_id AND r.filename = f.filename "+
			"WHERE f.agent_id = ? AND f.filename = ? AND f.deleted = 0", agentID, name).Scan(&rows).Error; err != nil {
			return rec, false, f, false, fmt.Errorf("read %s of agent %d with its index state: %w", name, agentID, err)
		}
		if len(rows) == 1 && rows[0].Filename == name {
			r := rows[0]
			if r.RecFound {
				rec = store.RecallFile{AgentID: agentID, Filename: name, FileID: r.RecFileID, Version: r.RecVersion,
					Chunks: r.RecChunks, EmbedPending: r.RecEmbedPending, Format: r.RecFormat}
			}
			return rec, r.RecFound, r.WorkspaceFile, true, nil
		}
	}
	err = db.Where("agent_id = ? AND filename = ?", agentID, name).Take(&rec).Error
	hasRec = err == nil
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return rec, false, f, false, fmt.Errorf("read index state of %s of agent %d: %w", name, agentID, err)
	}
	if !IsConversation(name) {
		return rec, hasRec, f, false, nil // not live: read above
	}
	f, exists, err = i.load(ctx, db, agentID, name)
	return rec, hasRec, f, exists, err
}

// fileWithState is a live workspace file with its index state (rec_*: zero when none).
type fileWithState struct {
	store.WorkspaceFile `gorm:"embedded"`
	RecFound            bool
	RecFileID           int64
	RecVersion          int64
	RecChunks           int
	RecEmbedPending     bool
	RecFormat           int
}

// load reads what name stands for: a live workspace file, or (for "conversation:<id>") the
// conversation's user and assistant messages rendered as a transcript whose version is its
// last message id.
func (i *Indexer) load(ctx context.Context, db *gorm.DB, agentID int64, name string) (store.WorkspaceFile, bool, error) {
	if conv, ok := strings.CutPrefix(name, ConversationPrefix); ok {
		return i.loadConversation(ctx, agentID, conv)
	}
	var f store.WorkspaceFile
	err := db.Where("agent_id = ? AND filename = ? AND deleted = 0", agentID, name).Take(&f).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("read %s of agent %d: %w", name, agentID, err)
	}
	return f, f.Filename == name, nil
}

func (i *Indexer) loadConversation(ctx context.Context, agentID int64, conv string) (store.WorkspaceFile, bool, error) {
	rows, err := i.msgs.Dialogue(ctx, agentID, conv)
	if err != nil {
		return store.WorkspaceFile{}, false, err
	}
	var b strings.Builder
	var last store.Message
	for _, m := range rows {
		text := strings.TrimSpace(strings.ToValidUTF8(m.Content, ""))
		if text == "" {
			continue
		}
		// One line per message; its own line breaks become spaces, so line ranges count
		// messages.
		b.WriteString(m.Role + ": " + strings.Join(strings.Fields(text), " ") + "\n")
		last = m
	}
	if last.ID == 0 {
		return store.WorkspaceFile{}, false, nil
	}
	return store.WorkspaceFile{AgentID: agentID, Filename: ConversationPrefix + conv, Content: b.String(),
		Version: last.ID, UpdateTime: last.CreateTime}, true, nil
}
