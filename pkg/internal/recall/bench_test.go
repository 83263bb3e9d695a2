package recall_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// The latency and memory harness (docs/benchmarks.md, "Memory search"), run on purpose:
//
//	go test ./pkg/internal/recall -run '^$' -bench 'BenchmarkRecallSearch$' -benchtime=1x -timeout 60m
//
// MATE_RECALL_BENCH_SIZES (default 1000,10000; the docs' table adds 100000) and
// MATE_RECALL_BENCH_DIMS (256) pick the agent sizes and vector dimensions. Each size is a
// sub-benchmark reporting its latencies in ms and its memory in MB. TestRecallSearchHarness
// runs the same harness small with every test run.
func BenchmarkRecallSearch(b *testing.B) {
	sizes := envInts(b, "MATE_RECALL_BENCH_SIZES", []int{1000, 10000})
	dims := envInts(b, "MATE_RECALL_BENCH_DIMS", []int{256})[0]
	env := newSearchEnv(b, dims, 1)
	for i, n := range sizes {
		agent := int64(1000 + i)
		env.seed(b, agent, n)
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			coldN := 30
			if n >= 100000 {
				coldN = 5
			}
			f := env.searchLatency(b, agent, 5*b.N, coldN, 10)
			b.ReportMetric(ms(f.warm, 50), "warm_p50_ms")
			b.ReportMetric(ms(f.warm, 99), "warm_p99_ms")
			b.ReportMetric(ms(f.cold, 50), "cold_p50_ms")
			b.ReportMetric(ms(f.cold, 99), "cold_p99_ms")
			b.ReportMetric(ms(f.changed, 50), "changed_p50_ms")
			b.ReportMetric(ms(f.changed, 99), "changed_p99_ms")
			b.ReportMetric(ms(f.changedFull, 50), "changed_full_p50_ms")
			b.ReportMetric(ms(f.warmAfter, 50), "warm_segs_p50_ms")
			b.ReportMetric(ms(f.warmAfter, 99), "warm_segs_p99_ms")
			b.ReportMetric(ms(f.coldFile, 50), "cold_file_p50_ms")
			b.ReportMetric(ms(f.coldFile, 99), "cold_file_p99_ms")
			b.ReportMetric(ms(f.coldRows, 50), "cold_rows_ms")
			b.ReportMetric(ms(f.coldVectors, 50), "cold_vectors_ms")
			b.ReportMetric(ms(f.coldBuild, 50), "cold_build_ms")
			b.ReportMetric(float64(f.cacheBytes>>20), "cache_MB")
			b.ReportMetric(float64(f.rssMB), "rss_MB")
		})
	}
}

// TestRecallSearchHarness runs BenchmarkRecallSearch's harness on a small agent: every
// search answers, the snapshot is cached, and a file indexed after the snapshot was built
// is found by the next search.
func TestRecallSearchHarness(t *testing.T) {
	env := newSearchEnv(t, 64, 1)
	env.seed(t, 1, 300)
	f := env.searchLatency(t, 1, 1, 3, 3)
	if len(f.warm) != 200 || len(f.cold) != 3 || len(f.coldFile) != 3 || len(f.changed) != 3 || len(f.changedFull) != 3 || len(f.warmAfter) != 200 {
		t.Fatalf("searches timed: %d warm, %d cold, %d and %d (full rebuild) after a change, %d warm after", len(f.warm), len(f.cold),
			len(f.changed), len(f.changedFull), len(f.warmAfter))
	}
	if f.cacheBytes <= 0 {
		t.Fatalf("the agent's snapshot is not cached (%d bytes)", f.cacheBytes)
	}
}

// BenchmarkRecallSearchManyAgents searches many agents in turn (twice round per b.N)
// through one searcher whose cache is bounded, and reports the process RSS:
//
//	MATE_RECALL_BENCH_AGENTS=1000 MATE_RECALL_BENCH_CHUNKS=1000 MATE_RECALL_BENCH_CACHE_MB=64 \
//	  go test ./pkg/internal/recall -run '^$' -bench BenchmarkRecallSearchManyAgents -benchtime=1x -timeout 60m
//
// The defaults (100 agents of 200 chunks, 8 MB) keep `make bench` short.
func BenchmarkRecallSearchManyAgents(b *testing.B) {
	agents := envInts(b, "MATE_RECALL_BENCH_AGENTS", []int{100})[0]
	chunks := envInts(b, "MATE_RECALL_BENCH_CHUNKS", []int{200})[0]
	budget := int64(envInts(b, "MATE_RECALL_BENCH_CACHE_MB", []int{8})[0]) << 20
	env := newSearchEnv(b, 256, 2)
	for a := 0; a < agents; a++ {
		env.seed(b, int64(a+1), chunks)
	}
	rssSeeded := rssMB()
	b.Run(fmt.Sprintf("agents=%d/chunks=%d/cache=%dMB", agents, chunks, budget>>20), func(b *testing.B) {
		f := env.manyAgents(b, agents, budget, 2*b.N)
		b.ReportMetric(float64(f.cached), "cached_agents")
		b.ReportMetric(float64(f.cacheBytes>>20), "cache_MB")
		b.ReportMetric(float64(rssSeeded), "rss_seeded_MB")
		b.ReportMetric(float64(f.rssPeakMB), "rss_peak_MB")
		b.ReportMetric(ms(f.lat, 50), "p50_ms")
		b.ReportMetric(ms(f.lat, 99), "p99_ms")
	})
}

// TestRecallSearchManyAgentsHarness runs BenchmarkRecallSearchManyAgents' harness small:
// the cache stays within its budget, keeping some agents and not all.
func TestRecallSearchManyAgentsHarness(t *testing.T) {
	const agents, budget = 20, 1 << 20
	env := newSearchEnv(t, 256, 2)
	for a := 0; a < agents; a++ {
		env.seed(t, int64(a+1), 50)
	}
	f := env.manyAgents(t, agents, budget, 2)
	t.Logf("%d agents cached in %d bytes", f.cached, f.cacheBytes)
	if len(f.lat) != 2*agents {
		t.Fatalf("%d searches timed, want %d", len(f.lat), 2*agents)
	}
	if f.cacheBytes > budget || f.cached == 0 || f.cached >= agents {
		t.Fatalf("cache holds %d agents in %d bytes: want some of the %d agents within %d bytes", f.cached, f.cacheBytes, agents, budget)
	}
}

// searchEnv is what the harnesses share: one SQLite database, the fake embeddings endpoint,
// the analyzer and a seeded random vocabulary.
type searchEnv struct {
	db    storetest.DB
	srv   *embedtest.Server
	emb   embed.Embedder
	an    *lexical.Analyzer
	rnd   *rand.Rand
	vocab []string
	dims  int
	// changes counts the files searchLatency indexed, so that each call adds new ones.
	changes int
}

func newSearchEnv(tb testing.TB, dims int, seed int64) *searchEnv {
	srv := embedtest.New(tb, dims)
	rnd := rand.New(rand.NewSource(seed))
	return &searchEnv{db: storetest.SQLite(tb), srv: srv, emb: embed.NewOpenAI(srv.Config()), an: lexical.NewAnalyzer(),
		rnd: rnd, vocab: benchVocab(rnd), dims: dims}
}

func (e *searchEnv) seed(tb testing.TB, agent int64, n int) {
	seedChunks(tb, context.Background(), e.db, e.srv, e.an, agent, n, e.dims, e.rnd, e.vocab)
}

type searchFigures struct {
	warm, cold, changed []time.Duration
	// changedFull: after the same changes, on a searcher rebuilding the whole index (the
	// baseline); warmAfter: warm again, on the segments the changes left.
	changedFull, warmAfter           []time.Duration
	coldRows, coldVectors, coldBuild []time.Duration
	// coldFile: cold searches loading the snapshot file (written after a first cold load).
	coldFile          []time.Duration
	cacheBytes, rssMB int64
}

// searchLatency times, on a new searcher, rounds × 200 searches on the agent's cached
// snapshot (warm), coldN with the snapshot dropped before each (cold: every chunk and vector
// row read from SQLite, posting lists rebuilt), and changed searches each after one more
// file was indexed (chunk, vector, index state and generation committed as the indexer
// does): the warm searcher reads only that file again, and must find it. RSS is the
// process's after a GC, with the snapshot cached.
func (e *searchEnv) searchLatency(tb testing.TB, agent int64, rounds, coldN, changed int) searchFigures {
	tb.Helper()
	ctx := context.Background()
	se := recall.NewSearcher(e.db.DB, e.an, recall.Settings{CacheBytes: 4 << 30}, recall.SearchWithEmbedder(e.emb))
	queries := make([]string, 200)
	for k := range queries {
		queries[k] = e.vocab[e.rnd.Intn(len(e.vocab))] + " " + e.vocab[e.rnd.Intn(len(e.vocab))] + " " + e.vocab[e.rnd.Intn(len(e.vocab))]
	}
	search := func(q string) recall.Result {
		res, err := se.Search(ctx, agent, recall.Query{Text: q})
		if err != nil {
			tb.Fatal(err)
		}
		return res
	}
	// Query vectors are embedded once up front: the figures are the search, not the
	// embedding endpoint's round trip (add the endpoint's own latency for the total).
	for _, q := range queries {
		search(q)
	}
	var f searchFigures
	for r := 0; r < rounds; r++ {
		for _, q := range queries {
			st := time.Now()
			search(q)
			f.warm = append(f.warm, time.Since(st))
		}
	}
	for r := 0; r < coldN; r++ {
		se.Invalidate(agent)
		st := time.Now()
		search(queries[r%len(queries)])
		f.cold = append(f.cold, time.Since(st))
		rows, vectors, build, err := se.ColdSteps(ctx, agent)
		if err != nil {
			tb.Fatal(err)
		}
		f.coldRows, f.coldVectors, f.coldBuild = append(f.coldRows, rows), append(f.coldVectors, vectors), append(f.coldBuild, build)
	}
	dir := tb.TempDir()
	files := recall.NewSearcher(e.db.DB, e.an, recall.Settings{CacheBytes: 4 << 30}, recall.SearchWithEmbedder(e.emb), recall.SearchWithSnapshotFiles(dir, 1))
	if _, err := files.Search(ctx, agent, recall.Query{Text: queries[0]}); err != nil {
		tb.Fatal(err)
	}
	poll.Until(tb, 5*time.Minute, "the snapshot file", func() bool {
		_, err := os.Stat(recall.SnapshotPath(dir, agent))
		return err == nil
	})
	for r := 0; r < coldN; r++ {
		files.Invalidate(agent)
		st := time.Now()
		if _, err := files.Search(ctx, agent, recall.Query{Text: queries[r%len(queries)]}); err != nil {
			tb.Fatal(err)
		}
		f.coldFile = append(f.coldFile, time.Since(st))
	}
	files.Invalidate(agent)
	full := recall.NewSearcher(e.db.DB, e.an, recall.Settings{CacheBytes: 4 << 30}, recall.SearchWithEmbedder(e.emb), recall.SearchWithFullRebuild())
	if _, err := full.Search(ctx, agent, recall.Query{Text: queries[0]}); err != nil {
		tb.Fatal(err)
	}
	for r := 0; r < changed; r++ {
		e.changes++
		name := fmt.Sprintf("memory/2027-%02d-%02d.md", 1+e.changes/28%12, 1+e.changes%28)
		token := fmt.Sprintf("fresh%05dx", e.changes)
		text := "fresh note " + e.vocab[e.rnd.Intn(len(e.vocab))] + " " + token
		hash := fmt.Sprintf("%064x", e.rnd.Uint64())
		err := e.db.DB.Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&store.RecallChunk{AgentID: agent, Filename: name, Text: text, Terms: lexical.JoinTerms(e.an.Terms(text)),
				Hash: hash, FileVersion: 1, NoteDate: time.Now().UTC(), Dated: true}).Error; err != nil {
				return err
			}
			if err := tx.Create(&store.RecallEmbedding{Model: "hash-test@" + strconv.Itoa(e.dims), Hash: hash, Dims: e.dims, Vector: embed.Encode(e.srv.Vector(text)), CreateTime: time.Now()}).Error; err != nil {
				return err
			}
			if err := tx.Create(&store.RecallFile{AgentID: agent, Filename: name, FileID: int64(1_000_000 + e.changes), Version: 1, Chunks: 1, IndexTime: time.Now()}).Error; err != nil {
				return err
			}
			return tx.Model(&store.RecallAgent{}).Where("agent_id = ?", agent).UpdateColumn("generation", gorm.Expr("generation + 1")).Error
		})
		if err != nil {
			tb.Fatal(err)
		}
		st := time.Now()
		res := search(token)
		f.changed = append(f.changed, time.Since(st))
		st = time.Now()
		if _, err := full.Search(ctx, agent, recall.Query{Text: token}); err != nil {
			tb.Fatal(err)
		}
		f.changedFull = append(f.changedFull, time.Since(st))
		found := false
		for _, h := range res.Hits {
			found = found || h.Filename == name
		}
		if !found {
			tb.Fatalf("%s, indexed after the snapshot was built, not found by a search for %q: %+v", name, token, res.Hits)
		}
	}
	for _, q := range queries {
		st := time.Now()
		search(q)
		f.warmAfter = append(f.warmAfter, time.Since(st))
	}
	full.Invalidate(agent)
	_, f.cacheBytes = se.CacheStats()
	f.rssMB = rssMB()
	runtime.KeepAlive(se) // the cached snapshot counts in the RSS
	return f
}

type manyFigures struct {
	lat        []time.Duration
	cached     int
	cacheBytes int64
	rssPeakMB  int64
}

// manyAgents searches agents 1..agents in turn, rounds times, through one new searcher whose
// cache holds budget bytes: the cache's worst case, almost every search a cold load.
func (e *searchEnv) manyAgents(tb testing.TB, agents int, budget int64, rounds int) manyFigures {
	tb.Helper()
	ctx := context.Background()
	se := recall.NewSearcher(e.db.DB, e.an, recall.Settings{CacheBytes: budget}, recall.SearchWithEmbedder(e.emb))
	var f manyFigures
	for round := 0; round < rounds; round++ {
		for a := 0; a < agents; a++ {
			st := time.Now()
			if _, err := se.Search(ctx, int64(a+1), recall.Query{Text: e.vocab[a%len(e.vocab)] + " " + e.vocab[(a*7)%len(e.vocab)]}); err != nil {
				tb.Fatal(err)
			}
			f.lat = append(f.lat, time.Since(st))
			if a%100 == 0 {
				f.rssPeakMB = max(f.rssPeakMB, rssMB())
			}
		}
	}
	f.cached, f.cacheBytes = se.CacheStats()
	f.rssPeakMB = max(f.rssPeakMB, rssMB())
	runtime.KeepAlive(se)
	return f
}

// envInts reads a comma-separated list of numbers from the environment (def when unset).
func envInts(tb testing.TB, name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			tb.Fatalf("%s=%q: want positive numbers separated by commas", name, s)
		}
		out = append(out, n)
	}
	return out
}

func benchVocab(rnd *rand.Rand) []string {
	words := strings.Fields("deploy server database order invoice customer meeting travel hotel flight budget project release bug fix review design team manager report weekly monthly backup restore cluster node kafka redis postgres network latency cache user profile preference coffee tea lunch dinner family school doctor appointment payment refund shipping address phone email calendar reminder")
	zh := []rune("用户部署服务器数据库订单发票客户会议出差酒店航班预算项目发布修复评审设计团队经理报告每周每月备份恢复集群节点网络延迟缓存偏好咖啡午餐晚餐家庭学校医生预约付款退款快递地址电话邮件日历提醒")
	var v []string
	v = append(v, words...)
	for i := 0; i < 3000; i++ {
		v = append(v, fmt.Sprintf("%s%d", words[rnd.Intn(len(words))], rnd.Intn(500)))
	}
	for i := 0; i+1 < len(zh); i++ {
		v = append(v, string(zh[i:i+2]))
	}
	return v
}

// seedChunks stores n chunks of about 120 words for agent, in files of 50 chunks, with
// vectors, straight into the tables (what the indexer would have written).
func seedChunks(t testing.TB, ctx context.Context, db storetest.DB, srv *embedtest.Server, an *lexical.Analyzer, agent int64, n, dims int, rnd *rand.Rand, vocab []string) {
	t.Helper()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var chunks []store.RecallChunk
	var embs []store.RecallEmbedding
	flush := func() {
		if err := db.DB.WithContext(ctx).CreateInBatches(chunks, 500).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.DB.WithContext(ctx).CreateInBatches(embs, 500).Error; err != nil {
			t.Fatal(err)
		}
		chunks, embs = chunks[:0], embs[:0]
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for w := 0; w < 120; w++ {
			// Zipf-like: common words often, rare ones rarely.
			idx := int(float64(len(vocab)) * rnd.Float64() * rnd.Float64() * rnd.Float64())
			b.WriteString(vocab[idx])
			b.WriteByte(' ')
		}
		text := b.String()
		hash := fmt.Sprintf("%016x%016x%016x%016x", agent, i, rnd.Uint64(), rnd.Uint64())
		day := now.AddDate(0, 0, -(i/50)%150)
		chunks = append(chunks, store.RecallChunk{AgentID: agent, Filename: fmt.Sprintf("memory/%s.md", day.Format(time.DateOnly)) + fmt.Sprint("-", i/50),
			Ordinal: i % 50, StartLine: (i % 50) * 10, EndLine: (i%50)*10 + 9, Text: text, Terms: lexical.JoinTerms(an.Terms(text)),
			Hash: hash, FileVersion: 1, NoteDate: day, Dated: true})
		embs = append(embs, store.RecallEmbedding{Model: "hash-test@" + strconv.Itoa(dims), Hash: hash, Dims: dims, Vector: embed.Encode(srv.Vector(text)), CreateTime: now})
		if len(chunks) == 2000 {
			flush()
		}
	}
	if len(chunks) > 0 {
		flush()
	}
	if err := db.DB.Create(&store.RecallAgent{AgentID: agent, Generation: 1}).Error; err != nil {
		t.Fatal(err)
	}
}

// ms is the p-th percentile of d in milliseconds.
func ms(d []time.Duration, p int) float64 {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return float64(s[min(i, len(s)-1)].Microseconds()) / 1000
}

func rssMB() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb >> 10
		}
	}
	return -1
}
