package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
)

// Validate checks every setting and names the key and the accepted values on error. The
// sections are checked in the order of the configuration reference; every problem found is
// reported at once.
func (c Config) Validate() error {
	m := c.Mate
	p := &problems{}
	validateBasics(m, p)
	validateDatabase(m, p)
	validateNATS(m, p)
	validateHTTP(m, p)
	validateLLM(m, p)
	validateAuth(m, p)
	validateMemory(m, p)
	validateWindow(m, p)
	validateTracing(m, p)
	validateRecall(m, p.bad)
	if len(p.errs) > 0 {
		return fmt.Errorf("invalid configuration:\n  %s", strings.Join(p.errs, "\n  "))
	}
	return nil
}

// problems collects what Validate finds, each with its key and environment variable.
type problems struct{ errs []string }

func (p *problems) bad(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf("%s (env %s): %s", key, EnvName(key), fmt.Sprintf(format, args...)))
}

func (p *problems) positive(key string, v float64) {
	if v <= 0 {
		p.bad(key, "%v; accepted: a number greater than 0", v)
	}
}

func (p *problems) nonNegative(key string, v float64) {
	if v < 0 {
		p.bad(key, "%v; accepted: 0 or more", v)
	}
}

// validateBasics checks the data directory, logging, language, time zone and listen address.
func validateBasics(m Mate, p *problems) {
	if strings.TrimSpace(m.DataDir) == "" && ((m.Database.Driver == "sqlite" && m.Database.DSN == "") || m.NATS.URL == "") {
		p.bad("mate.data-dir", "must not be empty: the embedded SQLite database and NATS store live there (e.g. ./data)")
	}
	if m.Log.Format != "text" && m.Log.Format != "json" {
		p.bad("mate.log.format", "%q is not supported; accepted: text, json", m.Log.Format)
	}
	if _, err := parseLevel(m.Log.Level); err != nil {
		p.bad("mate.log.level", "%q is not supported; accepted: debug, info, warn, error", m.Log.Level)
	}
	if m.Language != "zh" && m.Language != "en" {
		p.bad("mate.language", "%q is not supported; accepted: zh, en", m.Language)
	}
	if _, err := LoadLocation(m.Timezone); err != nil {
		p.bad("mate.timezone", "%q is not an IANA time zone (e.g. Asia/Shanghai, UTC, Local)", m.Timezone)
	}
	if _, _, err := net.SplitHostPort(m.HTTP.Addr); err != nil {
		p.bad("mate.http.addr", "%q is not host:port (e.g. 127.0.0.1:8080)", m.HTTP.Addr)
	}
}

// validateDatabase checks the driver, its DSN and SQLite's durability.
func validateDatabase(m Mate, p *problems) {
	switch m.Database.Driver {
	case "sqlite":
	case "mysql":
		if m.Database.DSN == "" {
			p.bad("mate.database.dsn", "required when the driver is mysql (e.g. user:pass@tcp(host:3306)/db)")
		}
	default:
		p.bad("mate.database.driver", "%q is not supported; accepted: sqlite, mysql", m.Database.Driver)
	}
	switch m.Database.SQLiteSynchronous {
	case "full", "normal":
	default:
		p.bad("mate.database.sqlite-synchronous", "%q is not supported; accepted: full (fsync at every commit, the default), normal (faster, may lose the last commits on a power loss)", m.Database.SQLiteSynchronous)
	}
}

// validateNATS checks the embedded listener, credentials, TLS, replicas and the stream's limits.
func validateNATS(m Mate, p *problems) {
	if m.NATS.EmbeddedListen != "" {
		if _, _, err := net.SplitHostPort(m.NATS.EmbeddedListen); err != nil {
			p.bad("mate.nats.embedded-listen", "%q is not host:port; leave empty for in-process only", m.NATS.EmbeddedListen)
		}
	}
	n := m.NATS
	if n.URL == "" && n.EmbeddedListen != "" && !LoopbackOnly(n.EmbeddedListen) && n.User == "" && n.NKeySeedFile == "" {
		p.bad("mate.nats.embedded-listen", "%q is not a loopback address: anyone reaching it could read every agent's conversations and publish events for any agent; set mate.nats.user and mate.nats.password (or mate.nats.nkey-seed-file) so that clients must authenticate, or listen on 127.0.0.1", n.EmbeddedListen)
	}
	if (n.User == "") != (n.Password == "") {
		p.bad("mate.nats.password", "mate.nats.user and mate.nats.password go together: set both or neither")
	}
	if n.User != "" && n.NKeySeedFile != "" {
		p.bad("mate.nats.nkey-seed-file", "set either mate.nats.user/password or mate.nats.nkey-seed-file, not both")
	}
	if n.CredsFile != "" && n.URL == "" {
		p.bad("mate.nats.creds-file", "JWT credentials need an external NATS (mate.nats.url); the embedded server takes mate.nats.user/password or mate.nats.nkey-seed-file")
	}
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		p.bad("mate.nats.tls.key-file", "mate.nats.tls.cert-file and mate.nats.tls.key-file go together: set both or neither")
	}
	if n.URL == "" && n.TLS.CAFile != "" && n.TLS.CertFile == "" {
		p.bad("mate.nats.tls.cert-file", "the embedded listener needs its certificate and key to verify client certificates against mate.nats.tls.ca-file")
	}
	if m.NATS.Replicas != 1 && m.NATS.Replicas != 3 && m.NATS.Replicas != 5 {
		p.bad("mate.nats.replicas", "%d; accepted: 1, 3, 5", m.NATS.Replicas)
	}
	p.positive("mate.nats.stream-max-age-hours", m.NATS.StreamMaxAgeHours)
	p.nonNegative("mate.nats.stream-max-bytes", float64(m.NATS.StreamMaxBytes))
	p.nonNegative("mate.nats.stream-max-msgs", float64(m.NATS.StreamMaxMsgs))
	p.positive("mate.nats.max-deliver", float64(m.NATS.MaxDeliver))
	p.positive("mate.nats.ack-wait-seconds", m.NATS.AckWaitSeconds)
}

// validateHTTP checks the timeouts (the write timeout must outlast the manual summarize
// wait, which the LLM timeout sets), the connection cap and the CORS origins.
func validateHTTP(m Mate, p *problems) {
	p.positive("mate.llm.timeout-seconds", m.LLM.TimeoutSeconds)
	p.positive("mate.http.read-timeout-seconds", m.HTTP.ReadTimeoutSeconds)
	p.positive("mate.http.write-timeout-seconds", m.HTTP.WriteTimeoutSeconds)
	p.positive("mate.http.idle-timeout-seconds", m.HTTP.IdleTimeoutSeconds)
	p.positive("mate.http.max-connections", float64(m.HTTP.MaxConnections))
	if manual := 2*m.LLM.TimeoutSeconds + 30; m.HTTP.WriteTimeoutSeconds <= manual {
		p.bad("mate.http.write-timeout-seconds", "%v; it must exceed the manual summarize wait (2 × mate.llm.timeout-seconds + 30 = %v s), or those answers would be cut off", m.HTTP.WriteTimeoutSeconds, manual)
	}
	for _, o := range m.HTTP.CORSOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			p.bad("mate.http.cors-origins", "%q; accepted: origins such as https://app.example.com (scheme and host, no path), comma-separated in the environment", o)
		}
	}
}

// validateLLM checks the model and the endpoint's URL.
func validateLLM(m Mate, p *problems) {
	if m.LLM.Model == "" {
		p.bad("mate.llm.model", "must not be empty (e.g. gpt-4o-mini, deepseek-chat, qwen-plus)")
	}
	if m.LLM.BaseURL != "" && !strings.HasPrefix(m.LLM.BaseURL, "http://") && !strings.HasPrefix(m.LLM.BaseURL, "https://") {
		p.bad("mate.llm.base-url", "%q; accepted: an http:// or https:// URL", m.LLM.BaseURL)
	}
}

// validateAuth checks each API key: its length and the agents it is scoped to.
func validateAuth(m Mate, p *problems) {
	for i, k := range m.Auth.Keys {
		if k.Key == "" {
			p.bad("mate.auth.keys", "key #%d is empty", i+1)
		} else if n := len([]rune(k.Key)); n < minKeyLength {
			p.bad("mate.auth.keys", "key #%d is %d characters; at least %d are required (e.g. openssl rand -hex 24)", i+1, n, minKeyLength)
		}
		for _, a := range k.Agents {
			if a == "*" {
				continue
			}
			if n, err := strconv.ParseInt(a, 10, 64); err != nil || n <= 0 {
				p.bad("mate.auth.keys", "key #%d: agent %q; accepted: a positive agent id or *", i+1, a)
			}
		}
		if len(k.Agents) == 0 && !k.Admin {
			p.bad("mate.auth.keys", "key #%d lists no agents; accepted: agent ids, * or admin", i+1)
		}
	}
}

// validateMemory checks the extraction, emergence and core-file budget settings.
func validateMemory(m Mate, p *problems) {
	mem := m.Memory
	p.nonNegative("mate.memory.min-messages-for-summarize", float64(mem.MinMessagesForSummarize))
	p.nonNegative("mate.memory.min-user-message-length", float64(mem.MinUserMessageLength))
	p.positive("mate.memory.summary-max-tokens", float64(mem.SummaryMaxTokens))
	p.positive("mate.memory.max-transcript-messages", float64(mem.MaxTranscriptMessages))
	p.nonNegative("mate.memory.cooldown-minutes", float64(mem.CooldownMinutes))
	p.positive("mate.memory.emergence-day-range", float64(mem.EmergenceDayRange))
	p.positive("mate.memory.max-file-bytes", float64(mem.MaxFileBytes))
	p.positive("mate.memory.lease-ttl-seconds", mem.LeaseTTLSeconds)
	budget := func(key string, v int) {
		if v < 1 || v > MaxBudgetTokens {
			p.bad(key, "%d; accepted: 1 to %d tokens", v, MaxBudgetTokens)
		}
	}
	budget("mate.memory.budget.memory-tokens", mem.Budget.MemoryTokens)
	budget("mate.memory.budget.profile-tokens", mem.Budget.ProfileTokens)
	if mem.ManualEmergenceCooldownSeconds < 1 {
		p.bad("mate.memory.manual-emergence-cooldown-seconds", "%v; accepted: 1 or more (seconds between two manual emergence runs of one agent)", mem.ManualEmergenceCooldownSeconds)
	}
	if _, err := cron.ParseStandard(mem.EmergenceCron); err != nil {
		p.bad("mate.memory.emergence-cron", "%q: %v; accepted: a 5-field cron expression such as \"0 2 * * *\"", mem.EmergenceCron, err)
	}
}

// validateWindow checks the context window and the scheduler's tick.
func validateWindow(m Mate, p *problems) {
	w := m.Agent.Conversation.Window
	p.positive("mate.agent.conversation.window.default-max-input-tokens", float64(w.DefaultMaxInputTokens))
	if w.CompactTriggerRatio <= 0 || w.CompactTriggerRatio > 1 {
		p.bad("mate.agent.conversation.window.compact-trigger-ratio", "%v; accepted: a number in (0, 1]", w.CompactTriggerRatio)
	}
	p.positive("mate.agent.conversation.window.preserve-recent-pairs", float64(w.PreserveRecentPairs))
	p.positive("mate.agent.conversation.window.summary-max-tokens", float64(w.SummaryMaxTokens))
	p.nonNegative("mate.agent.conversation.window.summary-cache-minutes", float64(w.SummaryCacheMinutes))
	p.positive("mate.scheduler.tick-seconds", m.Sched.TickSeconds)
	p.nonNegative("mate.scheduler.grace-minutes", float64(m.Sched.GraceMinutes))
}

// validateTracing checks the OTLP endpoint, the sample ratio and the service name.
func validateTracing(m Mate, p *problems) {
	if e := strings.TrimSpace(m.Tracing.OTLPEndpoint); e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.bad("mate.tracing.otlp-endpoint", "%q; accepted: the http:// or https:// URL of an OTLP/HTTP collector (e.g. http://localhost:4318), or empty for no export", e)
		}
	}
	if m.Tracing.SampleRatio < 0 || m.Tracing.SampleRatio > 1 || math.IsNaN(m.Tracing.SampleRatio) {
		p.bad("mate.tracing.sample-ratio", "%v; accepted: a number from 0 (no new traces) to 1 (every trace)", m.Tracing.SampleRatio)
	}
	if strings.ContainsAny(m.Tracing.ServiceName, " \t\n") {
		p.bad("mate.tracing.service-name", "%q contains white space; accepted: a name such as matememory-api, or empty for matememory-<target>", m.Tracing.ServiceName)
	}
}

// minKeyLength is the shortest API key accepted.
const minKeyLength = 16

// LoopbackOnly reports whether addr binds only to a loopback interface.
func LoopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
