package summarizer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pipeline's Prometheus metrics.
type Metrics struct {
	Published   *prometheus.CounterVec
	Events      *prometheus.CounterVec
	Outcomes    *prometheus.CounterVec
	Deferrals   *prometheus.CounterVec
	Contention  prometheus.Counter
	LLMSeconds  *prometheus.HistogramVec
	LLMTokens   *prometheus.CounterVec
	DeadLetters *prometheus.CounterVec
	// CoreChanges counts the model's changes of PROFILE.md and MEMORY.md by file, form
	// (edits, whole) and result (written, refused): how often a model keeps to the edits
	// contract, and how often its edits miss their anchors.
	CoreChanges *prometheus.CounterVec
	// Consolidations counts the consolidations of a core file past its high-water mark, by
	// file and result (applied, refused); Demotions the entries the service demoted to keep
	// a file within its budget (docs/core-memory.md).
	Consolidations *prometheus.CounterVec
	Demotions      *prometheus.CounterVec
	RunSeconds     prometheus.Histogram
}

// NewMetrics builds the metrics and registers them on reg (nil: unregistered, for tests
// that build several workers in one process).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_events_published_total",
			Help: "Events published through the API by subject kind and whether JetStream found them duplicate.",
		}, []string{"kind", "duplicate"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_summarizer_events_total",
			Help: "Deliveries handled by summarizer workers, by subject kind and what was done with them (ack, nak, dead_letter).",
		}, []string{"kind", "action"}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_summarizer_outcomes_total",
			Help: "Summarize attempts by ledger status (completed, skipped, refused, deferred, failed).",
		}, []string{"status"}),
		Deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_summarizer_deferrals_total",
			Help: "Events redelivered later instead of processed now, by reason (cooldown, lease, messages, backlog).",
		}, []string{"reason"}),
		Contention: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "matememory_summarizer_lease_contention_total",
			Help: "Attempts that found the agent's lease held by another worker.",
		}),
		LLMSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "matememory_summarizer_llm_seconds",
			Help:    "Latency of extraction calls by provider (llm, offline) and result (ok, error).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12),
		}, []string{"provider", "result"}),
		LLMTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_summarizer_llm_tokens_total",
			Help: "Tokens used by extraction calls, by direction (in, out).",
		}, []string{"direction"}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_summarizer_dead_letters_total",
			Help: "Messages dead-lettered by the summarizer, by cause (invalid, permanent, exhausted).",
		}, []string{"cause"}),
		CoreChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_summarizer_core_changes_total",
			Help: "Changes of PROFILE.md and MEMORY.md the model answered, by file, form (edits, whole) and result (written, refused).",
		}, []string{"file", "form", "result"}),
		Consolidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_core_consolidations_total",
			Help: "Consolidations of MEMORY.md or PROFILE.md past 90% of its budget, by file and result (applied, refused).",
		}, []string{"file", "result"}),
		Demotions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_core_demotions_total",
			Help: "Entries of MEMORY.md or PROFILE.md the service moved to the archive to keep the file within its budget, by file.",
		}, []string{"file"}),
		RunSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "matememory_summarizer_attempt_seconds",
			Help:    "Time to handle one delivery, end to end.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Published, m.Events, m.Outcomes, m.Deferrals, m.Contention, m.LLMSeconds,
			m.LLMTokens, m.DeadLetters, m.CoreChanges, m.Consolidations, m.Demotions, m.RunSeconds)
	}
	return m
}
