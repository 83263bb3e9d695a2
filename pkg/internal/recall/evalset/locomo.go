package evalset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// LoCoMo (Maharana et al., ACL 2024; github.com/snap-research/locomo): long conversations
// between two speakers over up to 35 sessions, with questions whose evidence is a list of
// turns ("D3:7": session 3, its 7th turn). Category 5 questions are adversarial: the
// conversation does not answer them.

// LocomoDevSamples are the samples tuned on; the others of locomo10 (conv-44, 47, 48, 49,
// 50) are held out.
var LocomoDevSamples = []string{"conv-26", "conv-30", "conv-41", "conv-42", "conv-43"}

// LocomoSample is one conversation and its questions.
type LocomoSample struct {
	ID       string
	SpeakerA string
	Sessions []LocomoSession
	QA       []LocomoQA
}

// LocomoSession is one session: its date and turns.
type LocomoSession struct {
	N     int
	Date  time.Time
	Turns []LocomoTurn
}

// LocomoTurn is one turn of a session.
type LocomoTurn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption"`
}

// LocomoQA is a question and the turns that answer it.
type LocomoQA struct {
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Category int      `json:"category"`
}

// LoadLocomo reads LoCoMo's JSON (data/locomo10.json: a list of samples with sample_id,
// conversation {speaker_a, speaker_b, session_N, session_N_date_time} and qa) and keeps the
// samples named in only (none: all).
func LoadLocomo(path string, only []string) ([]LocomoSample, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []LocomoQA                 `json:"qa"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("locomo %s: %w (want a list of samples as in data/locomo10.json)", path, err)
	}
	var out []LocomoSample
	for _, s := range in {
		if len(only) > 0 && !slices.Contains(only, s.SampleID) {
			continue
		}
		smp := LocomoSample{ID: s.SampleID, QA: s.QA}
		_ = json.Unmarshal(s.Conversation["speaker_a"], &smp.SpeakerA)
		for key, v := range s.Conversation {
			rest, ok := strings.CutPrefix(key, "session_")
			if !ok || strings.Contains(rest, "_") {
				continue
			}
			n, err := strconv.Atoi(rest)
			if err != nil {
				continue
			}
			ses := LocomoSession{N: n}
			if err := json.Unmarshal(v, &ses.Turns); err != nil {
				return nil, fmt.Errorf("locomo %s: %s %s: %w", path, s.SampleID, key, err)
			}
			var when string
			_ = json.Unmarshal(s.Conversation[key+"_date_time"], &when)
			if ses.Date, err = time.Parse("3:04 pm on 2 January, 2006", strings.TrimSpace(when)); err != nil {
				return nil, fmt.Errorf("locomo %s: %s %s_date_time %q: %w", path, s.SampleID, key, when, err)
			}
			if len(ses.Turns) > 0 {
				smp.Sessions = append(smp.Sessions, ses)
			}
		}
		sort.Slice(smp.Sessions, func(a, b int) bool { return smp.Sessions[a].N < smp.Sessions[b].N })
		if len(smp.Sessions) == 0 || len(smp.QA) == 0 {
			return nil, fmt.Errorf("locomo %s: sample %q has %d sessions and %d questions", path, s.SampleID, len(smp.Sessions), len(smp.QA))
		}
		out = append(out, smp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("locomo %s: none of the samples %v", path, only)
	}
	return out, nil
}

// Locomo sources: each session stored as a conversation, or written as a daily note.
const (
	LocomoConversations = "conversations"
	LocomoNotes         = "daily notes"
)

// turnLine is the line of a session's turn j in what is indexed: a conversation's transcript
// has a line per message; a note has its heading and a blank line first.
func turnLine(source string, j int) int {
	if source == LocomoNotes {
		return j + 3
	}
	return j + 1
}

func (t LocomoTurn) line() string {
	text := strings.Join(strings.Fields(t.Text), " ")
	if c := strings.TrimSpace(t.BlipCaption); c != "" {
		text += " [shares a photo: " + c + "]"
	}
	return t.Speaker + ": " + text
}

// SeedLocomo stores sample s for agentID from source: each session a conversation (its
// messages dated as the session) or a daily note memory/<date>-session-<n>.md, and indexes it.
func SeedLocomo(ctx context.Context, db *gorm.DB, ws *workspace.Service, ix *recall.Indexer, agentID int64, s LocomoSample, source string) error {
	for _, ses := range s.Sessions {
		if source == LocomoNotes {
			var b strings.Builder
			fmt.Fprintf(&b, "# %s (session %d)\n\n", ses.Date.Format("2006-01-02 15:04"), ses.N)
			for _, t := range ses.Turns {
				b.WriteString(t.line() + "\n")
			}
			name := fmt.Sprintf("memory/%s-session-%d.md", ses.Date.Format(time.DateOnly), ses.N)
			if _, _, err := ws.Write(ctx, agentID, name, b.String(), workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
				return fmt.Errorf("%s session %d: %w", s.ID, ses.N, err)
			}
			continue
		}
		conv := fmt.Sprintf("%s-s%d", s.ID, ses.N)
		msgs := make([]store.Message, len(ses.Turns))
		for j, t := range ses.Turns {
			role := "assistant"
			if t.Speaker == s.SpeakerA {
				role = "user"
			}
			msgs[j] = store.Message{AgentID: agentID, ConversationID: conv, Role: role, Content: t.line(), CreateTime: ses.Date.Add(time.Duration(j) * time.Second)}
		}
		if err := db.WithContext(ctx).CreateInBatches(msgs, 200).Error; err != nil {
			return fmt.Errorf("%s session %d: %w", s.ID, ses.N, err)
		}
		if _, err := ix.Sync(ctx, agentID, recall.ConversationPrefix+conv); err != nil {
			return fmt.Errorf("%s session %d: %w", s.ID, ses.N, err)
		}
	}
	if source == LocomoNotes {
		if _, err := ix.Backfill(ctx, agentID, nil); err != nil {
			return err
		}
	}
	return nil
}

// LocomoHit is a ranked hit as the metrics see it: the session and the lines it spans.
type LocomoHit struct {
	Session, Start, End int
	Relevance           float64
}

// sessionOf is the session of an indexed name written by SeedLocomo (0: none).
var sessionOf = regexp.MustCompile(`(?:-s|-session-)(\d+)(?:\.md)?$`)

// LocomoHits turns a search's hits into LocomoHits.
func LocomoHits(hits []recall.Hit) []LocomoHit {
	out := make([]LocomoHit, 0, len(hits))
	for _, h := range hits {
		out = append(out, locomoHit(h.Filename, h.StartLine, h.EndLine, h.Relevance))
	}
	return out
}

func locomoHit(name string, start, end int, rel float64) LocomoHit {
	h := LocomoHit{Start: start, End: end, Relevance: rel}
	if m := sessionOf.FindStringSubmatch(name); m != nil {
		h.Session, _ = strconv.Atoi(m[1])
	}
	return h
}

// LocomoMetrics are one system's scores over one source.
type LocomoMetrics struct {
	System, Source string
	// Questions counts the answerable questions (categories 1–4) with evidence.
	Questions int
	// Session[k] and Turn[k] are recall@k (k = 1, 3, 5, 10): an evidence session among the
	// sessions of the first k hits; an evidence turn inside one of the first k hits.
	Session, Turn map[int]float64
	// MRR is the session-level mean reciprocal rank (first 10).
	MRR float64
	// NoHit is the share of answerable questions answered with no hit.
	NoHit float64
	// ByCategory is session recall@5 per category.
	ByCategory map[int]float64
	// AUC is how well the top hit's relevance separates answerable questions from
	// adversarial ones (category 5); -1 when the system has no relevance.
	AUC float64
	// P50 and P99 are the search latencies.
	P50, P99 time.Duration
	perCat   map[int]int
	lat      []time.Duration
	top, adv []float64
}

// LocomoKs are the cut-offs reported.
var LocomoKs = []int{1, 3, 5, 10}

func newLocomoMetrics(system, source string) *LocomoMetrics {
	return &LocomoMetrics{System: system, Source: source, Session: map[int]float64{}, Turn: map[int]float64{},
		ByCategory: map[int]float64{}, perCat: map[int]int{}, AUC: -1}
}

// add scores one question's hits.
func (m *LocomoMetrics) add(s LocomoSample, q LocomoQA, hits []LocomoHit, took time.Duration, withRelevance bool) {
	m.lat = append(m.lat, took)
	top := 0.0
	if len(hits) > 0 {
		top = hits[0].Relevance
	}
	if q.Category == 5 {
		if withRelevance {
			m.adv = append(m.adv, top)
		}
		return
	}
	type turn struct{ session, j int }
	var ev []turn
	for _, e := range q.Evidence {
		for _, part := range strings.Split(e, ";") {
			sid, tid, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(part), "D"), ":")
			a, err1 := strconv.Atoi(sid)
			b, err2 := strconv.Atoi(tid)
			if ok && err1 == nil && err2 == nil {
				ev = append(ev, turn{a, b - 1})
			}
		}
	}
	if len(ev) == 0 {
		return
	}
	if withRelevance {
		m.top = append(m.top, top)
	}
	m.Questions++
	m.perCat[q.Category]++
	if len(hits) == 0 {
		m.NoHit++
	}
	sesRank, turnRank := -1, -1
	for r, h := range hits {
		for _, e := range ev {
			if h.Session != e.session {
				continue
			}
			if sesRank < 0 {
				sesRank = r
			}
			if l := turnLine(m.Source, e.j); turnRank < 0 && h.Start <= l && l <= h.End {
				turnRank = r
			}
		}
	}
	for _, k := range LocomoKs {
		if sesRank >= 0 && sesRank < k {
			m.Session[k]++
		}
		if turnRank >= 0 && turnRank < k {
			m.Turn[k]++
		}
	}
	if sesRank >= 0 {
		m.MRR += 1 / float64(sesRank+1)
	}
	if sesRank >= 0 && sesRank < 5 {
		m.ByCategory[q.Category]++
	}
}

func (m *LocomoMetrics) finish() {
	if n := float64(m.Questions); n > 0 {
		for _, k := range LocomoKs {
			m.Session[k] /= n
			m.Turn[k] /= n
		}
		m.MRR /= n
		m.NoHit /= n
	}
	for c, n := range m.perCat {
		m.ByCategory[c] /= float64(n)
	}
	if len(m.top) > 0 && len(m.adv) > 0 {
		m.AUC = threshold(m.top, m.adv, recall.ConfidentRelevance).AUC
	}
	slices.Sort(m.lat)
	if len(m.lat) > 0 {
		m.P50 = m.lat[len(m.lat)/2]
		m.P99 = m.lat[min(len(m.lat)-1, int(math.Ceil(float64(len(m.lat))*0.99))-1)]
	}
}

// FTS5 tokenizers the baseline is measured with.
var fts5Tokenizers = []string{"unicode61", "porter unicode61", "trigram"}

// ftsWords are the words of a question, as FTS5 MATCH phrases.
var ftsWords = regexp.MustCompile(`[\p{L}\p{N}]+`)

// fts5Query is the question as an FTS5 query: any of its words (OR), each quoted; words
// shorter than three characters are left out for the trigram tokenizer (it cannot match them).
func fts5Query(question, tokenizer string) string {
	var parts []string
	seen := map[string]bool{}
	for _, w := range ftsWords.FindAllString(strings.ToLower(question), -1) {
		if seen[w] || (tokenizer == "trigram" && len([]rune(w)) < 3) {
			continue
		}
		seen[w] = true
		parts = append(parts, `"`+w+`"`)
	}
	return strings.Join(parts, " OR ")
}

// RunLocomo stores each sample twice (as conversations, then as daily notes; agents from
// firstAgent on), and scores se's searches (top 10) beside SQLite FTS5 BM25 with three
// tokenizers over the very chunks MateMemory indexed, in the same database and run.
func RunLocomo(ctx context.Context, db *gorm.DB, ws *workspace.Service, ix *recall.Indexer, se *recall.Searcher, samples []LocomoSample, firstAgent int64) ([]*LocomoMetrics, error) {
	var rows []*LocomoMetrics
	byKey := map[string]*LocomoMetrics{}
	get := func(system, source string) *LocomoMetrics {
		k := system + "\x00" + source
		if byKey[k] == nil {
			byKey[k] = newLocomoMetrics(system, source)
			rows = append(rows, byKey[k])
		}
		return byKey[k]
	}
	agent := firstAgent
	for _, source := range []string{LocomoConversations, LocomoNotes} {
		for _, s := range samples {
			if err := SeedLocomo(ctx, db, ws, ix, agent, s, source); err != nil {
				return nil, err
			}
			mm := get("MateMemory (service lexical mode)", source)
			for _, q := range s.QA {
				start := time.Now()
				res, err := se.Search(ctx, agent, recall.Query{Text: q.Question, MaxResults: 10})
				took := time.Since(start)
				if err != nil {
					return nil, fmt.Errorf("%s %q: %w", s.ID, q.Question, err)
				}
				mm.add(s, q, LocomoHits(res.Hits), took, true)
			}
			if err := ftsBaseline(ctx, db, agent, s, source, get); err != nil {
				return nil, err
			}
			agent++
		}
	}
	for _, m := range rows {
		m.finish()
	}
	return rows, nil
}

// ftsBaseline indexes the agent's chunks in FTS5 tables (one per tokenizer) and scores the
// sample's questions over them.
func ftsBaseline(ctx context.Context, db *gorm.DB, agent int64, s LocomoSample, source string, get func(system, source string) *LocomoMetrics) error {
	var chunks []store.RecallChunk
	if err := db.WithContext(ctx).Select("filename", "start_line", "end_line", "text").Where("agent_id = ?", agent).Find(&chunks).Error; err != nil {
		return err
	}
	for _, tok := range fts5Tokenizers {
		conn := db.WithContext(ctx)
		if err := conn.Exec("DROP TABLE IF EXISTS eval_fts").Error; err != nil {
			return err
		}
		if err := conn.Exec(fmt.Sprintf("CREATE VIRTUAL TABLE eval_fts USING fts5(text, filename UNINDEXED, start_line UNINDEXED, end_line UNINDEXED, tokenize = '%s')", tok)).Error; err != nil {
			return fmt.Errorf("fts5 (%s): %w", tok, err)
		}
		for _, c := range chunks {
			if err := conn.Exec("INSERT INTO eval_fts(text, filename, start_line, end_line) VALUES (?, ?, ?, ?)", c.Text, c.Filename, c.StartLine, c.EndLine).Error; err != nil {
				return err
			}
		}
		m := get("SQLite FTS5 BM25 ("+tok+")", source)
		for _, q := range s.QA {
			var hits []LocomoHit
			start := time.Now()
			if expr := fts5Query(q.Question, tok); expr != "" {
				var found []struct {
					Filename           string
					StartLine, EndLine int
				}
				if err := conn.Raw("SELECT filename, start_line, end_line FROM eval_fts WHERE eval_fts MATCH ? ORDER BY bm25(eval_fts) LIMIT 10", expr).
					Scan(&found).Error; err != nil {
					return fmt.Errorf("fts5 (%s) %q: %w", tok, expr, err)
				}
				for _, f := range found {
					hits = append(hits, locomoHit(f.Filename, f.StartLine, f.EndLine, 0))
				}
			}
			m.add(s, q, hits, time.Since(start), false)
		}
	}
	return db.WithContext(ctx).Exec("DROP TABLE IF EXISTS eval_fts").Error
}

// PrintLocomo writes the LoCoMo tables: recall and MRR per system and source, session
// recall@5 per category, and the separation of adversarial questions.
func PrintLocomo(w io.Writer, rows []*LocomoMetrics) {
	fmt.Fprintln(w, "| source | system | questions | session R@1 | R@3 | R@5 | R@10 | turn R@1 | R@3 | R@5 | R@10 | MRR | no hit | p50 | p99 |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f%% | %s | %s |\n", m.Source, m.System, m.Questions,
			m.Session[1], m.Session[3], m.Session[5], m.Session[10], m.Turn[1], m.Turn[3], m.Turn[5], m.Turn[10], m.MRR, 100*m.NoHit,
			m.P50.Round(10*time.Microsecond), m.P99.Round(10*time.Microsecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| source | system | session R@5: cat 1 (multi-hop) | cat 2 (temporal) | cat 3 (open-domain) | cat 4 (single-hop) | adversarial vs answerable: AUC of the top hit's relevance |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range rows {
		auc := "—"
		if m.AUC >= 0 {
			auc = fmt.Sprintf("%.3f", m.AUC)
		}
		fmt.Fprintf(w, "| %s | %s | %.3f | %.3f | %.3f | %.3f | %s |\n", m.Source, m.System, m.ByCategory[1], m.ByCategory[2], m.ByCategory[3], m.ByCategory[4], auc)
	}
}
