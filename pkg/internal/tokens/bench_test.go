package tokens

import (
	"strings"
	"testing"
	"unicode"
)

// category splits the corpus by how much of it is Chinese.
func category(s string) string {
	var han, all int
	for _, r := range s {
		if unicode.IsSpace(r) {
			continue
		}
		all++
		if unicode.Is(unicode.Han, r) {
			han++
		}
	}
	switch {
	case han == 0:
		return "english-code"
	case han*10 >= all*6:
		return "chinese"
	}
	return "mixed"
}

// BenchmarkAccuracy reports, against o200k_base on testdata/corpus.txt, the mean absolute
// percentage error (mape_%) and the mean signed error (bias_%, positive = over-counts) of the
// calibrated estimate and of the spec's heuristic, overall and by category. The timing is
// irrelevant; run with -benchtime=1x.
func BenchmarkAccuracy(b *testing.B) {
	o, err := NewCounter().ByEncoding(O200K)
	if err != nil {
		b.Fatal(err)
	}
	all := corpus(b)
	groups := map[string][]string{"all": all}
	for _, s := range all {
		groups[category(s)] = append(groups[category(s)], s)
	}
	for _, g := range []string{"all", "chinese", "mixed", "english-code"} {
		for _, m := range []struct {
			name  string
			count func(string) int
		}{{"estimate", estimator{}.Count}, {"spec-heuristic", Heuristic}} {
			b.Run(g+"/"+m.name, func(b *testing.B) {
				var a accuracy
				for i := 0; i < b.N; i++ {
					a = measure(groups[g], o.Count, m.count)
				}
				b.ReportMetric(a.mape, "mape_%")
				b.ReportMetric(a.bias, "bias_%")
				b.ReportMetric(a.worst, "worst_%")
				b.ReportMetric(float64(len(groups[g])), "samples")
			})
		}
	}
}

// BenchmarkCount reports tokens counted per second by each tokenizer on the whole corpus.
func BenchmarkCount(b *testing.B) {
	c := NewCounter()
	text := strings.Join(corpus(b), "\n")
	ref, _ := c.ByEncoding(O200K)
	refTokens := ref.Count(text)
	for _, enc := range []string{O200K, CL100K, Estimate} {
		tk, err := c.ByEncoding(enc)
		if err != nil {
			b.Fatal(err)
		}
		tk.Count("warm up")
		b.Run(enc, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for i := 0; i < b.N; i++ {
				tk.Count(text)
			}
			// Tokens are o200k tokens so the rates compare like with like.
			b.ReportMetric(float64(refTokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
