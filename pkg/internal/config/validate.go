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

// Validate checks every setting and names the key and the accepted values on error.
func (c Config) Validate() error {
	m := c.Mate
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s (env %s): %s", key, EnvName(key), fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(m.DataDir) == "" && ((m.Database.Driver == "sqlite" && m.Database.DSN == "") || m.NATS.URL == "") {
		bad("mate.data-dir", "must not be empty: the embedded SQLite database and NATS store live there (e.g. ./data)")
	}
	if m.Log.Format != "text" && m.Log.Format != "json" {
		bad("mate.log.format", "%q is not supported; accepted: text, json", m.Log.Format)
	}
	if _, err := ParseLevel(m.Log.Level); err != nil {
		bad("mate.log.level", "%q is not supported; accepted: debug, info, warn, error", m.Log.Level)
	}
	if m.Language != "zh" && m.Language != "en" {
		bad("mate.language", "%q is not supported; accepted: zh, en", m.Language)
	}
	if _, err := LoadLocation(m.Timezone); err != nil {
		bad("mate.timezone", "%q is not an IANA time zone (e.g. Asia/Shanghai, UTC, Local)", m.Timezone)
	}
	if _, _, err := net.SplitHostPort(m.HTTP.Addr); err != nil {
		bad("mate.http.addr", "%q is not host:port (e.g. 127.0.0.1:8080)", m.HTTP.Addr)
	}
	switch m.Database.Driver {
	case "sqlite":
	case "mysql":
		if m.Database.DSN == "" {
			bad("mate.database.dsn", "required when the driver is mysql (e.g. user:pass@tcp(host:3306)/db)")
		}
	default:
		bad("mate.database.driver", "%q is not supported; accepted: sqlite, mysql", m.Database.Driver)
	}
	switch m.Database.SQLiteSynchronous {
	case "full", "normal":
	default:
		bad("mate.database.sqlite-synchronous", "%q is not supported; accepted: full (fsync at every commit, the default), normal (faster, may lose the last commits on a power loss)", m.Database.SQLiteSynchronous)
	}
	if m.NATS.EmbeddedListen != "" {
		if _, _, err := net.SplitHostPort(m.NATS.EmbeddedListen); err != nil {
			bad("mate.nats.embedded-listen", "%q is not host:port; leave empty for in-process only", m.NATS.EmbeddedListen)
		}
	}
	n := m.NATS
	if n.URL == "" && n.EmbeddedListen != "" && !LoopbackOnly(n.EmbeddedListen) && n.User == "" && n.NKeySeedFile == "" {
		bad("mate.nats.embedded-listen", "%q is not a loopback address: anyone reaching it could read every agent's conversations and publish events for any agent; set mate.nats.user and mate.nats.password (or mate.nats.nkey-seed-file) so that clients must authenticate, or listen on 127.0.0.1", n.EmbeddedListen)
	}
	if (n.User == "") != (n.Password == "") {
		bad("mate.nats.password", "mate.nats.user and mate.nats.password go together: set both or neither")
	}
	if n.User != "" && n.NKeySeedFile != "" {
		bad("mate.nats.nkey-seed-file", "set either mate.nats.user/password or mate.nats.nkey-seed-file, not both")
	}
	if n.CredsFile != "" && n.URL == "" {
		bad("mate.nats.creds-file", "JWT credentials need an external NATS (mate.nats.url); the embedded server takes mate.nats.user/password or mate.nats.nkey-seed-file")
	}
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		bad("mate.nats.tls.key-file", "mate.nats.tls.cert-file and mate.nats.tls.key-file go together: set both or neither")
	}
	if n.URL == "" && n.TLS.CAFile != "" && n.TLS.CertFile == "" {
		bad("mate.nats.tls.cert-file", "the embedded listener needs its certificate and key to verify client certificates against mate.nats.tls.ca-file")
	}
	if m.NATS.Replicas != 1 && m.NATS.Replicas != 3 && m.NATS.Replicas != 5 {
		bad("mate.nats.replicas", "%d; accepted: 1, 3, 5", m.NATS.Replicas)
	}
	positive := func(key string, v float64) {
		if v <= 0 {
			bad(key, "%v; accepted: a number greater than 0", v)
		}
	}
	nonNegative := func(key string, v float64) {
		if v < 0 {
			bad(key, "%v; accepted: 0 or more", v)
		}
	}
	positive("mate.nats.stream-max-age-hours", m.NATS.StreamMaxAgeHours)
	nonNegative("mate.nats.stream-max-bytes", float64(m.NATS.StreamMaxBytes))
	nonNegative("mate.nats.stream-max-msgs", float64(m.NATS.StreamMaxMsgs))
	positive("mate.nats.max-deliver", float64(m.NATS.MaxDeliver))
	positive("mate.nats.ack-wait-seconds", m.NATS.AckWaitSeconds)
	positive("mate.llm.timeout-seconds", m.LLM.TimeoutSeconds)
	positive("mate.http.read-timeout-seconds", m.HTTP.ReadTimeoutSeconds)
	positive("mate.http.write-timeout-seconds", m.HTTP.WriteTimeoutSeconds)
	positive("mate.http.idle-timeout-seconds", m.HTTP.IdleTimeoutSeconds)
	positive("mate.http.max-connections", float64(m.HTTP.MaxConnections))
	if manual := 2*m.LLM.TimeoutSeconds + 30; m.HTTP.WriteTimeoutSeconds <= manual {
		bad("mate.http.write-timeout-seconds", "%v; it must exceed the manual summarize wait (2 × mate.llm.timeout-seconds + 30 = %v s), or those answers would be cut off", m.HTTP.WriteTimeoutSeconds, manual)
	}
	for _, o := range m.HTTP.CORSOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("mate.http.cors-origins", "%q; accepted: origins such as https://app.example.com (scheme and host, no path), comma-separated in the environment", o)
		}
	}
	if m.LLM.Model == "" {
		bad("mate.llm.model", "must not be empty (e.g. gpt-4o-mini, deepseek-chat, qwen-plus)")
	}
	if m.LLM.BaseURL != "" && !strings.HasPrefix(m.LLM.BaseURL, "http://") && !strings.HasPrefix(m.LLM.BaseURL, "https://") {
		bad("mate.llm.base-url", "%q; accepted: an http:// or https:// URL", m.LLM.BaseURL)
	}
	for i, k := range m.Auth.Keys {
		if k.Key == "" {
			bad("mate.auth.keys", "key #%d is empty", i+1)
		} else if n := len([]rune(k.Key)); n < MinKeyLength {
			bad("mate.auth.keys", "key #%d is %d characters; at least %d are required (e.g. openssl rand -hex 24)", i+1, n, MinKeyLength)
		}
		for _, a := range k.Agents {
			if a == "*" {
				continue
			}
			if n, err := strconv.ParseInt(a, 10, 64); err != nil || n <= 0 {
				bad("mate.auth.keys", "key #%d: agent %q; accepted: a positive agent id or *", i+1, a)
			}
		}
		if len(k.Agents) == 0 && !k.Admin {
			bad("mate.auth.keys", "key #%d lists no agents; accepted: agent ids, * or admin", i+1)
		}
	}
	mem := m.Memory
	nonNegative("mate.memory.min-messages-for-summarize", float64(mem.MinMessagesForSummarize))
	nonNegative("mate.memory.min-user-message-length", float64(mem.MinUserMessageLength))
	positive("mate.memory.summary-max-tokens", float64(mem.SummaryMaxTokens))
	positive("mate.memory.max-transcript-messages", float64(mem.MaxTranscriptMessages))
	nonNegative("mate.memory.cooldown-minutes", float64(mem.CooldownMinutes))
	positive("mate.memory.emergence-day-range", float64(mem.EmergenceDayRange))
	positive("mate.memory.max-file-bytes", float64(mem.MaxFileBytes))
	positive("mate.memory.lease-ttl-seconds", mem.LeaseTTLSeconds)
	budget := func(key string, v int) {
		if v < 1 || v > MaxBudgetTokens {
			bad(key, "%d; accepted: 1 to %d tokens", v, MaxBudgetTokens)
		}
	}
	budget("mate.memory.budget.memory-tokens", mem.Budget.MemoryTokens)
	budget("mate.memory.budget.profile-tokens", mem.Budget.ProfileTokens)
	if mem.ManualEmergenceCooldownSeconds < 1 {
		bad("mate.memory.manual-emergence-cooldown-seconds", "%v; accepted: 1 or more (seconds between two manual emergence runs of one agent)", mem.ManualEmergenceCooldownSeconds)
	}
	if _, err := cron.ParseStandard(mem.EmergenceCron); err != nil {
		bad("mate.memory.emergence-cron", "%q: %v; accepted: a 5-field cron expression such as \"0 2 * * *\"", mem.EmergenceCron, err)
	}
	w := m.Agent.Conversation.Window
	positive("mate.agent.conversation.window.default-max-input-tokens", float64(w.DefaultMaxInputTokens))
	if w.CompactTriggerRatio <= 0 || w.CompactTriggerRatio > 1 {
		bad("mate.agent.conversation.window.compact-trigger-ratio", "%v; accepted: a number in (0, 1]", w.CompactTriggerRatio)
	}
	positive("mate.agent.conversation.window.preserve-recent-pairs", float64(w.PreserveRecentPairs))
	positive("mate.agent.conversation.window.summary-max-tokens", float64(w.SummaryMaxTokens))
	nonNegative("mate.agent.conversation.window.summary-cache-minutes", float64(w.SummaryCacheMinutes))
	positive("mate.scheduler.tick-seconds", m.Sched.TickSeconds)
	nonNegative("mate.scheduler.grace-minutes", float64(m.Sched.GraceMinutes))
	if e := strings.TrimSpace(m.Tracing.OTLPEndpoint); e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("mate.tracing.otlp-endpoint", "%q; accepted: the http:// or https:// URL of an OTLP/HTTP collector (e.g. http://localhost:4318), or empty for no export", e)
		}
	}
	if m.Tracing.SampleRatio < 0 || m.Tracing.SampleRatio > 1 || math.IsNaN(m.Tracing.SampleRatio) {
		bad("mate.tracing.sample-ratio", "%v; accepted: a number from 0 (no new traces) to 1 (every trace)", m.Tracing.SampleRatio)
	}
	if strings.ContainsAny(m.Tracing.ServiceName, " \t\n") {
		bad("mate.tracing.service-name", "%q contains white space; accepted: a name such as matememory-api, or empty for matememory-<target>", m.Tracing.ServiceName)
	}
	validateRecall(m, bad)
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// MinKeyLength is the shortest API key accepted.
const MinKeyLength = 16

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
