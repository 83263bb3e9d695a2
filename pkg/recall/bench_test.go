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

	"github.com/matememory/matememory/pkg/recall"
	"github.com/matememory/matememory/pkg/recall/embed"
	"github.com/matememory/matememory/pkg/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/recall/lexical"
	"github.com/matememory/matememory/pkg/store"
	"github.com/matememory/matememory/pkg/store/storetest"
)

// The latency and memory harness (docs/benchmarks.md, "Memory search"). It is a test that
// prints a table, run on purpose:
//
//	MATE_RECALL_BENCH=1 go test -run TestRecallBench -v -timeout 60m ./pkg/recall/
//
// MATE_RECALL_BENCH_SIZES (default 1000,10000,100000) and MATE_RECALL_BENCH_DIMS (256) pick
// the agent sizes and vector dimensions.
func TestRecallBench(t *testing.T) {
	if os.Getenv("MATE_RECALL_BENCH") == "" {
		t.Skip("set MATE_RECALL_BENCH=1 to run the memory search benchmark")
	}
	sizes := []int{1000, 10000, 100000}
	if s := os.Getenv("MATE_RECALL_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sizes = append(sizes, n)
		}
	}
	dims := 256
	if s := os.Getenv("MATE_RECALL_BENCH_DIMS"); s != "" {
		dims, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	srv := embedtest.New(t, dims)
	emb := embed.NewOpenAI(srv.Config())
	an := lexical.NewAnalyzer()
	db := storetest.SQLite(t)
	rnd := rand.New(rand.NewSource(1))
	vocab := benchVocab(rnd)
	fmt.Printf("| chunks | dims | warm p50 | warm p99 | cold p50 | cold p99 | after one file changed p50 | cache bytes | RSS after |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i, n := range sizes {
		agent := int64(1000 + i)
		seedChunks(t, ctx, db, srv, an, agent, n, dims, rnd, vocab)
		se := recall.NewSearcher(db.DB, an, recall.Settings{CacheBytes: 4 << 30}, recall.SearchWithEmbedder(emb))
		queries := make([]string, 200)
		for k := range queries {
			queries[k] = vocab[rnd.Intn(len(vocab))] + " " + vocab[rnd.Intn(len(vocab))] + " " + vocab[rnd.Intn(len(vocab))]
		}
		// Query vectors are embedded once up front: the figures are the search, not the
		// embedding endpoint's round trip (add the endpoint's own latency for the total).
		for _, q := range queries {
			if _, err := se.Search(ctx, agent, recall.Query{Text: q}); err != nil {
				t.Fatal(err)
			}
		}
		var warm []time.Duration
		for r := 0; r < 5; r++ {
			for _, q := range queries {
				st := time.Now()
				if _, err := se.Search(ctx, agent, recall.Query{Text: q}); err != nil {
					t.Fatal(err)
				}
				warm = append(warm, time.Since(st))
			}
		}
		coldN := 30
		if n >= 100000 {
			coldN = 5
		}
		var cold []time.Duration
		for r := 0; r < coldN; r++ {
			se.Invalidate(agent)
			st := time.Now()
			if _, err := se.Search(ctx, agent, recall.Query{Text: queries[r]}); err != nil {
				t.Fatal(err)
			}
			cold = append(cold, time.Since(st))
		}
		// Refresh: one more file indexed (as the indexer commits it), then a search on the
		// warm searcher: only that file is read again.
		var refresh []time.Duration
		for r := 0; r < 10; r++ {
			name := fmt.Sprintf("memory/2026-06-%02d.md", r+1)
			text := "fresh note " + vocab[rnd.Intn(len(vocab))]
			hash := fmt.Sprintf("%064x", rnd.Uint64())
			err := db.DB.Transaction(func(tx *gorm.DB) error {
				if err := tx.Create(&store.RecallChunk{AgentID: agent, Filename: name, Text: text, Terms: lexical.JoinTerms(an.Terms(text)),
					Hash: hash, FileVersion: 1, NoteDate: time.Now().UTC(), Dated: true}).Error; err != nil {
					return err
				}
				if err := tx.Create(&store.RecallEmbedding{Model: "hash-test@" + strconv.Itoa(dims), Hash: hash, Dims: dims, Vector: embed.Encode(srv.Vector(text)), CreateTime: time.Now()}).Error; err != nil {
					return err
				}
				if err := tx.Create(&store.RecallFile{AgentID: agent, Filename: name, FileID: int64(r + 1), Version: 1, Chunks: 1, IndexTime: time.Now()}).Error; err != nil {
					return err
				}
				return tx.Model(&store.RecallAgent{}).Where("agent_id = ?", agent).UpdateColumn("generation", gorm.Expr("generation + 1")).Error
			})
			if err != nil {
				t.Fatal(err)
			}
			st := time.Now()
			if _, err := se.Search(ctx, agent, recall.Query{Text: queries[r]}); err != nil {
				t.Fatal(err)
			}
			refresh = append(refresh, time.Since(st))
		}
		_, used := se.CacheStats()
		rss := rssMB()
		runtime.KeepAlive(se) // the cached snapshot counts in the RSS
		fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %d MB | %d MB |\n", n, dims, pct(warm, 50), pct(warm, 99), pct(cold, 50), pct(cold, 99), pct(refresh, 50), used>>20, rss)
	}
}

// TestRecallBenchManyAgents searches many agents in turn through one searcher whose cache
// is bounded, and reports the process RSS:
//
//	MATE_RECALL_BENCH=1 MATE_RECALL_BENCH_AGENTS=1000 MATE_RECALL_BENCH_CHUNKS=1000 go test -run TestRecallBenchManyAgents -v -timeout 60m ./pkg/recall/
func TestRecallBenchManyAgents(t *testing.T) {
	if os.Getenv("MATE_RECALL_BENCH") == "" {
		t.Skip("set MATE_RECALL_BENCH=1 to run the memory search benchmark")
	}
	agents, chunks, budget := 1000, 1000, int64(256<<20)
	if s := os.Getenv("MATE_RECALL_BENCH_AGENTS"); s != "" {
		agents, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("MATE_RECALL_BENCH_CHUNKS"); s != "" {
		chunks, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("MATE_RECALL_BENCH_CACHE_MB"); s != "" {
		mb, _ := strconv.Atoi(s)
		budget = int64(mb) << 20
	}
	dims := 256
	ctx := context.Background()
	srv := embedtest.New(t, dims)
	emb := embed.NewOpenAI(srv.Config())
	an := lexical.NewAnalyzer()
	db := storetest.SQLite(t)
	rnd := rand.New(rand.NewSource(2))
	vocab := benchVocab(rnd)
	for a := 0; a < agents; a++ {
		seedChunks(t, ctx, db, srv, an, int64(a+1), chunks, dims, rnd, vocab)
	}
	rssSeeded := rssMB()
	se := recall.NewSearcher(db.DB, an, recall.Settings{CacheBytes: budget}, recall.SearchWithEmbedder(emb))
	var lat []time.Duration
	peak := int64(0)
	for round := 0; round < 2; round++ {
		for a := 0; a < agents; a++ {
			st := time.Now()
			if _, err := se.Search(ctx, int64(a+1), recall.Query{Text: vocab[a%len(vocab)] + " " + vocab[(a*7)%len(vocab)]}); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(st))
			if a%100 == 0 {
				peak = max(peak, rssMB())
			}
		}
	}
	n, used := se.CacheStats()
	final := rssMB()
	runtime.KeepAlive(se)
	fmt.Printf("| agents × chunks | cache budget | cached agents | cache bytes | RSS after seeding | RSS peak while searching | search p50 | p99 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Printf("| %d × %d | %d MB | %d | %d MB | %d MB | %d MB | %s | %s |\n", agents, chunks, budget>>20, n, used>>20, rssSeeded, max(peak, final), pct(lat, 50), pct(lat, 99))
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
func seedChunks(t *testing.T, ctx context.Context, db storetest.DB, srv *embedtest.Server, an *lexical.Analyzer, agent int64, n, dims int, rnd *rand.Rand, vocab []string) {
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

func pct(d []time.Duration, p int) string {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	v := s[min(i, len(s)-1)]
	if v < time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(v.Microseconds())/1000)
	}
	return v.Round(100 * time.Microsecond).String()
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
