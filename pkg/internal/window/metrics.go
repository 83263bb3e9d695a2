package window

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests    *prometheus.CounterVec
	compactions *prometheus.CounterVec
	llmCalls    prometheus.Counter
	flushes     *prometheus.CounterVec
	waiting     prometheus.Gauge
	cuts        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_context_requests_total", Help: "Context window requests by kind (assemble, retry).",
		}, []string{"kind"}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_context_compactions_total",
			Help: "Context windows that dropped history, by how: llm (new summary), cache (cached or another replica's summary), extractive (degraded), trim (no summary).",
		}, []string{"how"}),
		llmCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "matememory_context_summary_llm_calls_total", Help: "LLM calls made to summarize conversations.",
		}),
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_context_flush_requests_total", Help: "Summarize requests published for evicted, unextracted messages, by result.",
		}, []string{"result"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "matememory_context_summary_waiting",
			Help: "Requests waiting for a summary another replica is computing.",
		}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_context_workspace_cuts_total",
			Help: "Workspace files cut or left out of a context window's system message because it could not hold them, by file (core file names, else other).",
		}, []string{"file"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.compactions, m.llmCalls, m.flushes, m.waiting, m.cuts)
	}
	return m
}

func (m metrics) observe(r *Result) {
	if !r.Compacted {
		return
	}
	how := "trim"
	switch {
	case r.SummaryKind == "extractive":
		how = "extractive"
	case r.SummaryKind == "llm" && r.CacheHit:
		how = "cache"
	case r.SummaryKind == "llm":
		how = "llm"
	}
	m.compactions.WithLabelValues(how).Inc()
}
