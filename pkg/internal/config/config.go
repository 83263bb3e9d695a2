// Package config loads MateMemory's configuration: a YAML file with the spec's property
// names (mate.memory.*, mate.agent.conversation.window.*) plus environment overrides whose
// names are the property path upper-cased with '.' and '-' turned into '_'
// (mate.memory.cooldown-minutes → MATE_MEMORY_COOLDOWN_MINUTES).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the root of the configuration tree.
type Config struct {
	Mate Mate `yaml:"mate"`
}

// Mate holds every MateMemory setting.
type Mate struct {
	// DataDir is where the embedded SQLite database and NATS store live.
	DataDir string `yaml:"data-dir"`
	// Language picks the Chinese ("zh") or English ("en") prompts and default file texts.
	Language string `yaml:"language"`
	// Timezone is the IANA zone used for dates (daily notes, cron) unless an agent has its own.
	Timezone string   `yaml:"timezone"`
	HTTP     HTTP     `yaml:"http"`
	Database Database `yaml:"database"`
	NATS     NATS     `yaml:"nats"`
	LLM      LLM      `yaml:"llm"`
	// Embedding is the embeddings endpoint of memory search; empty base-url = lexical only.
	Embedding Embedding      `yaml:"embedding"`
	Auth      Auth           `yaml:"auth"`
	Memory    Memory         `yaml:"memory"`
	Agent     Agent          `yaml:"agent"`
	Sched     Scheduler      `yaml:"scheduler"`
	Prompts   PromptSettings `yaml:"prompts"`
	Tracing   Tracing        `yaml:"tracing"`
	Log       Log            `yaml:"log"`
}

// Log configures the process's log: Format "text" (key=value lines) or "json" (one JSON
// object per line, for log collectors), Level debug, info, warn or error.
type Log struct {
	Format string `yaml:"format"`
	Level  string `yaml:"level"`
}

// HTTP configures the API listener.
type HTTP struct {
	Addr string `yaml:"addr"`
	// CORSOrigins are browser origins allowed to call the API (env: comma-separated).
	CORSOrigins []string `yaml:"cors-origins"`
	// ReadTimeoutSeconds bounds reading a whole request, body included (slow clients).
	ReadTimeoutSeconds float64 `yaml:"read-timeout-seconds"`
	// WriteTimeoutSeconds bounds a request from the end of its headers to the end of the
	// answer; it must exceed the manual summarize and emergence waits.
	WriteTimeoutSeconds float64 `yaml:"write-timeout-seconds"`
	// IdleTimeoutSeconds closes keep-alive connections idle for that long.
	IdleTimeoutSeconds float64 `yaml:"idle-timeout-seconds"`
	// MaxConnections caps concurrent connections (further ones wait to be accepted).
	MaxConnections int `yaml:"max-connections"`
}

// Database selects the SQL store.
type Database struct {
	// Driver is "sqlite" (embedded, pure Go) or "mysql" (MySQL/MariaDB).
	Driver string `yaml:"driver"`
	// DSN is the driver's data source name; empty means <data-dir>/matememory.db for sqlite.
	DSN string `yaml:"dsn"`
	// SQLiteSynchronous is SQLite's synchronous pragma: "full" (the default) fsyncs the WAL
	// at every commit, as the embedded NATS server fsyncs every write, so a power loss loses
	// no acknowledged change; "normal" skips that fsync and may lose the last commits on a
	// power loss (not on a process crash). Ignored for mysql and for a DSN with its own
	// _pragma parameters.
	SQLiteSynchronous string `yaml:"sqlite-synchronous"`
}

// NATS configures the broker. An empty URL starts an embedded server.
type NATS struct {
	// URL of an external NATS (comma-separated list for a cluster); empty = embedded server.
	URL string `yaml:"url"`
	// EmbeddedListen is host:port for the embedded server to accept clients on; empty keeps it
	// in-process only (no TCP port is opened).
	EmbeddedListen string `yaml:"embedded-listen"`
	// Replicas is the replication factor of streams and KV buckets (1 for one node, 3 for a cluster).
	Replicas int `yaml:"replicas"`
	// StreamMaxAgeHours bounds how long events stay replayable.
	StreamMaxAgeHours float64 `yaml:"stream-max-age-hours"`
	// StreamMaxBytes and StreamMaxMsgs bound MATE_EVENTS (0 = unlimited); a full stream
	// refuses new events rather than discarding unprocessed ones.
	StreamMaxBytes int `yaml:"stream-max-bytes"`
	StreamMaxMsgs  int `yaml:"stream-max-msgs"`
	// SyncAlways makes the embedded server fsync every write (see DESIGN.md §8).
	SyncAlways bool `yaml:"sync-always"`
	// MaxDeliver bounds redeliveries before a message is dead-lettered.
	MaxDeliver int `yaml:"max-deliver"`
	// AckWaitSeconds must exceed the worst-case LLM call.
	AckWaitSeconds float64 `yaml:"ack-wait-seconds"`
	// User and Password authenticate this process to NATS. With the embedded server they are
	// also the one account its TCP listener accepts (required when it is not loopback; with
	// API keys set and none configured, the listener gets a generated password, see
	// pkg/internal/app/natscreds.go).
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// NKeySeedFile authenticates with an NKEY seed instead; the embedded listener then accepts
	// that key's public part.
	NKeySeedFile string `yaml:"nkey-seed-file"`
	// CredsFile is a JWT user credentials file (decentralised auth on an external cluster).
	CredsFile string  `yaml:"creds-file"`
	TLS       NATSTLS `yaml:"tls"`
}

// NATSTLS configures TLS to NATS: for an external server, the CA to trust and an optional
// client certificate; for the embedded listener, its certificate and key (and, with CAFile,
// client certificates are verified).
type NATSTLS struct {
	CertFile string `yaml:"cert-file"`
	KeyFile  string `yaml:"key-file"`
	CAFile   string `yaml:"ca-file"`
}

// HasCredentials reports whether NATS credentials are configured.
func (n NATS) HasCredentials() bool {
	return n.User != "" || n.NKeySeedFile != "" || n.CredsFile != ""
}

// LLM selects an OpenAI-compatible endpoint. Empty BaseURL and APIKey = offline provider.
type LLM struct {
	BaseURL        string  `yaml:"base-url"`
	APIKey         string  `yaml:"api-key"`
	Model          string  `yaml:"model"`
	TimeoutSeconds float64 `yaml:"timeout-seconds"`
	// JSONMode asks the endpoint for response_format json_object.
	JSONMode bool `yaml:"json-mode"`
}

// Auth lists API keys. With none, the server only listens on loopback.
type Auth struct {
	Keys []APIKey `yaml:"keys"`
}

// APIKey is one bearer token and what it may touch.
type APIKey struct {
	Key string `yaml:"key"`
	// Agents lists agent ids the key may act for; "*" means all.
	Agents []string `yaml:"agents"`
	// Admin keys may use operator endpoints (dead letters, replay, all cron jobs).
	Admin bool `yaml:"admin"`
}

// Memory is the spec's MemoryProperties (mate.memory.*) plus MateMemory's additions.
type Memory struct {
	AutoSummarizeEnabled    bool    `yaml:"auto-summarize-enabled"`
	MinMessagesForSummarize int     `yaml:"min-messages-for-summarize"`
	MinUserMessageLength    int     `yaml:"min-user-message-length"`
	SkipCronConversations   bool    `yaml:"skip-cron-conversations"`
	SummaryMaxTokens        int     `yaml:"summary-max-tokens"`
	MaxTranscriptMessages   int     `yaml:"max-transcript-messages"`
	CooldownMinutes         Minutes `yaml:"cooldown-minutes"`
	EmergenceEnabled        bool    `yaml:"emergence-enabled"`
	EmergenceDayRange       int     `yaml:"emergence-day-range"`
	// EmergenceCron is the schedule of each agent's Memory Consolidation job.
	EmergenceCron string `yaml:"emergence-cron"`
	// MaxFileBytes caps a workspace file's content.
	MaxFileBytes int `yaml:"max-file-bytes"`
	// LeaseTTLSeconds is the per-agent lease's lifetime between renewals.
	LeaseTTLSeconds float64 `yaml:"lease-ttl-seconds"`
	// RedactLLMInput masks secrets in the extraction transcript before it is sent to the
	// model (turn off only for a self-hosted model you trust with them).
	RedactLLMInput bool `yaml:"redact-llm-input"`
	// ManualEmergenceCooldownSeconds: one manual emergence per agent per this many seconds
	// (concurrent requests share one run; later ones get 429 with Retry-After).
	ManualEmergenceCooldownSeconds float64 `yaml:"manual-emergence-cooldown-seconds"`
	// Search tunes memory search (recall); see docs/recall.md.
	Search Search `yaml:"search"`
	// Budget bounds the injected core files (mate.memory.budget.*); see docs/window.md.
	Budget Budget `yaml:"budget"`
}

// Budget is mate.memory.budget.*: the token budget of each injected core file, counted with
// the tokenizer of the agent's model (mate.llm.model). An agent may override either value
// (PATCH /api/v1/agents/{agentId}).
type Budget struct {
	MemoryTokens  int `yaml:"memory-tokens"`
	ProfileTokens int `yaml:"profile-tokens"`
}

// MaxBudgetTokens bounds a core file's budget (a file of that size would not fit any
// model's context next to a conversation anyway).
const MaxBudgetTokens = 1_000_000

// Embedding selects an OpenAI-compatible embeddings endpoint (mate.embedding.*).
type Embedding struct {
	BaseURL string `yaml:"base-url"`
	APIKey  string `yaml:"api-key"`
	Model   string `yaml:"model"`
	// Dimensions, when > 0, asks the model for shorter vectors.
	Dimensions     int     `yaml:"dimensions"`
	TimeoutSeconds float64 `yaml:"timeout-seconds"`
}

// Search is mate.memory.search.*: indexing and ranking of memory search.
type Search struct {
	// Enabled turns the index, the recall tools and the search endpoint on.
	Enabled bool `yaml:"enabled"`
	// Sources are what is indexed: "files" (the memory files) and/or "conversations" (the
	// stored user and assistant messages, one source per conversation). Env: comma-separated.
	Sources       []string `yaml:"sources"`
	ChunkTokens   int      `yaml:"chunk-tokens"`
	OverlapTokens int      `yaml:"overlap-tokens"`
	// VectorWeight and TextWeight weigh cosine and normalised BM25.
	VectorWeight float64 `yaml:"vector-weight"`
	TextWeight   float64 `yaml:"text-weight"`
	// HalfLifeDays halves a dated note's score every so many days; negative = no decay.
	HalfLifeDays float64 `yaml:"half-life-days"`
	// DecayFloor is the least factor decay applies, however old the note.
	DecayFloor float64 `yaml:"decay-floor"`
	MMRLambda  float64 `yaml:"mmr-lambda"`
	MinScore   float64 `yaml:"min-score"`
	// MinCoverage is the relevance floor: the IDF-weighted share of a query's words a chunk
	// must hold to be a hit (0 = no floor). MinCosine lets a chunk below it be a hit on its
	// cosine alone (0 = never); cosines depend on the model: calibrate with `api eval`.
	MinCoverage float64 `yaml:"min-coverage"`
	MinCosine   float64 `yaml:"min-cosine"`
	MaxResults  int     `yaml:"max-results"`
	// MaxQueryBytes bounds a query (longer: 400).
	MaxQueryBytes int `yaml:"max-query-bytes"`
	// CacheMB bounds each API process's cache of agents' chunks and vectors (LRU).
	CacheMB float64 `yaml:"cache-mb"`
	// ReconcileSeconds is how often the indexer sweeps for changes it missed.
	ReconcileSeconds float64 `yaml:"reconcile-seconds"`
	// SnapshotMinChunks: an API process keeps the snapshot of every agent with at least so
	// many chunks in a file under <data-dir>/recall, read on a cold load (0 = no files).
	SnapshotMinChunks int `yaml:"snapshot-min-chunks"`
}

// Agent nests the spec's mate.agent.conversation.window.
type Agent struct {
	Conversation Conversation `yaml:"conversation"`
}

// Conversation nests the window settings.
type Conversation struct {
	Window Window `yaml:"window"`
}

// Window is the spec's ConversationWindowProperties.
type Window struct {
	DefaultMaxInputTokens int     `yaml:"default-max-input-tokens"`
	CompactTriggerRatio   float64 `yaml:"compact-trigger-ratio"`
	PreserveRecentPairs   int     `yaml:"preserve-recent-pairs"`
	SummaryMaxTokens      int     `yaml:"summary-max-tokens"`
	SummaryCacheMinutes   Minutes `yaml:"summary-cache-minutes"`
}

// Scheduler configures the cron slot emitter.
type Scheduler struct {
	TickSeconds  float64 `yaml:"tick-seconds"`
	GraceMinutes Minutes `yaml:"grace-minutes"`
}

// PromptSettings lets operators override the embedded prompt templates.
type PromptSettings struct {
	// Dir, when set, is searched first for <name>.<lang>.md before the embedded templates.
	Dir string `yaml:"dir"`
}

// Tracing configures OpenTelemetry tracing. Trace context (W3C traceparent) is always carried
// from HTTP requests through NATS message headers into the workers; spans are recorded and
// exported only when OTLPEndpoint is set.
type Tracing struct {
	// OTLPEndpoint is the OTLP/HTTP collector URL (http://host:4318, or a full URL with its
	// path); empty = no spans are recorded or exported.
	OTLPEndpoint string `yaml:"otlp-endpoint"`
	// ServiceName is the service.name of this process's spans; empty = matememory-<target>
	// (matememory-api, matememory-summarizer, ...).
	ServiceName string `yaml:"service-name"`
	// SampleRatio is the share of new traces recorded (0 to 1); a request that arrives with a
	// sampled traceparent is always recorded.
	SampleRatio float64 `yaml:"sample-ratio"`
}

// Minutes is a duration in (possibly fractional) minutes: 0.05 = 3 s.
type Minutes float64

// Duration converts to time.Duration.
func (m Minutes) Duration() time.Duration { return time.Duration(float64(m) * float64(time.Minute)) }

// Seconds converts fractional seconds to a time.Duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Default returns the spec's defaults and MateMemory's own.
func Default() Config {
	return Config{Mate: Mate{
		DataDir:  "./data",
		Language: "zh",
		Timezone: "Local",
		HTTP: HTTP{Addr: "127.0.0.1:8080", ReadTimeoutSeconds: 30, WriteTimeoutSeconds: 330,
			IdleTimeoutSeconds: 120, MaxConnections: 1024},
		Database: Database{Driver: "sqlite", SQLiteSynchronous: "full"},
		NATS: NATS{
			Replicas:          1,
			StreamMaxAgeHours: 14 * 24,
			SyncAlways:        true,
			MaxDeliver:        20,
			AckWaitSeconds:    180,
		},
		LLM: LLM{Model: "gpt-4o-mini", TimeoutSeconds: 120, JSONMode: true},
		Memory: Memory{
			AutoSummarizeEnabled:           true,
			MinMessagesForSummarize:        4,
			MinUserMessageLength:           10,
			SkipCronConversations:          true,
			SummaryMaxTokens:               1000,
			MaxTranscriptMessages:          30,
			CooldownMinutes:                5,
			EmergenceEnabled:               true,
			EmergenceDayRange:              7,
			EmergenceCron:                  "0 2 * * *",
			MaxFileBytes:                   1 << 20,
			LeaseTTLSeconds:                30,
			RedactLLMInput:                 true,
			ManualEmergenceCooldownSeconds: 60,
			Search: Search{Enabled: true, Sources: []string{"files"}, ChunkTokens: 400, OverlapTokens: 60, VectorWeight: 0.7, TextWeight: 0.3,
				HalfLifeDays: 30, DecayFloor: 0.8, MMRLambda: 0.9, MinScore: 0, MinCoverage: 0.6, MinCosine: 0.8, MaxResults: 50,
				MaxQueryBytes: 2000, CacheMB: 256, ReconcileSeconds: 30, SnapshotMinChunks: 5000},
			Budget: Budget{MemoryTokens: 2000, ProfileTokens: 800},
		},
		Embedding: Embedding{Model: "text-embedding-3-small", TimeoutSeconds: 30},
		Agent: Agent{Conversation: Conversation{Window: Window{
			DefaultMaxInputTokens: 128000,
			CompactTriggerRatio:   0.75,
			PreserveRecentPairs:   2,
			SummaryMaxTokens:      300,
			SummaryCacheMinutes:   30,
		}}},
		Sched:   Scheduler{TickSeconds: 1, GraceMinutes: 60},
		Tracing: Tracing{SampleRatio: 1},
		Log:     Log{Format: "text", Level: "info"},
	}}
}

// Load reads defaults, then the YAML file at path (if path is non-empty), then the
// environment, and validates the result.
func Load(path string, env func(string) (string, bool)) (Config, error) {
	cfg := Default()
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("read config file %s: %w", path, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("parse config file %s: %w", path, err)
		}
	}
	if env == nil {
		env = os.LookupEnv
	}
	if err := applyEnv(&cfg, env); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// LLMConfigured reports whether a real LLM endpoint was configured.
func (c Config) LLMConfigured() bool { return c.Mate.LLM.BaseURL != "" || c.Mate.LLM.APIKey != "" }

// EmbeddingConfigured reports whether an embeddings endpoint was configured.
func (c Config) EmbeddingConfigured() bool { return c.Mate.Embedding.BaseURL != "" }

// Location resolves the configured default time zone.
func (c Config) Location() *time.Location {
	loc, err := LoadLocation(c.Mate.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// LoadLocation resolves an IANA zone name; "Local" and "" mean the process's zone.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return time.Local, nil
	}
	return time.LoadLocation(name)
}

// SearchesConversations reports whether stored conversations are a memory-search source.
func (s Search) SearchesConversations() bool {
	for _, src := range s.Sources {
		if src == "conversations" {
			return true
		}
	}
	return false
}
