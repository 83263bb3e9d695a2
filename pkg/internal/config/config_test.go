package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/config"
)

// env builds a lookup function from pairs.
func env(pairs ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsMatchSpec(t *testing.T) {
	cfg, err := config.Load("", env())
	if err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	m := cfg.Mate
	mem := m.Memory
	// mate.memory.* as the spec's MemoryProperties.
	if !mem.AutoSummarizeEnabled || mem.MinMessagesForSummarize != 4 || mem.MinUserMessageLength != 10 ||
		!mem.SkipCronConversations || mem.SummaryMaxTokens != 1000 || mem.MaxTranscriptMessages != 30 ||
		mem.CooldownMinutes.Duration() != 5*time.Minute || !mem.EmergenceEnabled || mem.EmergenceDayRange != 7 ||
		mem.EmergenceCron != "0 2 * * *" {
		t.Errorf("mate.memory defaults differ from the spec: %+v", mem)
	}
	if mem.Budget.MemoryTokens != 2000 || mem.Budget.ProfileTokens != 800 {
		t.Errorf("budget %+v, want MEMORY.md 2000 and PROFILE.md 800 tokens", mem.Budget)
	}
	if mem.MaxFileBytes != 1<<20 {
		t.Errorf("max-file-bytes %d, want 1 MiB", mem.MaxFileBytes)
	}
	// mate.agent.conversation.window.* as ConversationWindowProperties.
	w := m.Agent.Conversation.Window
	if w.DefaultMaxInputTokens != 128000 || w.CompactTriggerRatio != 0.75 || w.PreserveRecentPairs != 2 ||
		w.SummaryMaxTokens != 300 || w.SummaryCacheMinutes.Duration() != 30*time.Minute {
		t.Errorf("window defaults differ from the spec: %+v", w)
	}
	if m.HTTP.Addr != "127.0.0.1:8080" || m.DataDir != "./data" || m.Database.Driver != "sqlite" || m.NATS.URL != "" {
		t.Errorf("process defaults: addr %q data %q driver %q nats %q", m.HTTP.Addr, m.DataDir, m.Database.Driver, m.NATS.URL)
	}
	if !m.NATS.SyncAlways {
		t.Error("the embedded NATS must fsync every write by default (DESIGN §8)")
	}
	if cfg.LLMConfigured() {
		t.Error("no LLM should be configured by default")
	}
}

func TestEnvNames(t *testing.T) {
	for path, want := range map[string]string{
		"mate.memory.cooldown-minutes":                         "MATE_MEMORY_COOLDOWN_MINUTES",
		"mate.agent.conversation.window.compact-trigger-ratio": "MATE_AGENT_CONVERSATION_WINDOW_COMPACT_TRIGGER_RATIO",
		"mate.http.addr": "MATE_HTTP_ADDR",
		"mate.data-dir":  "MATE_DATA_DIR",
		"mate.llm.model": "MATE_LLM_MODEL",
		"mate.auth.keys": "MATE_AUTH_KEYS",
		"mate.agent.conversation.window.default-max-input-tokens": "MATE_AGENT_CONVERSATION_WINDOW_DEFAULT_MAX_INPUT_TOKENS",
	} {
		if got := config.EnvName(path); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", path, got, want)
		}
	}
	keys := strings.Join(config.Keys(), " ")
	for _, k := range []string{"mate.memory.cooldown-minutes", "mate.agent.conversation.window.summary-max-tokens", "mate.auth.keys", "mate.llm.base-url"} {
		if !strings.Contains(" "+keys+" ", " "+k+" ") {
			t.Errorf("Keys() lacks %s", k)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	cfg, err := config.Load("", env(
		"MATE_MEMORY_COOLDOWN_MINUTES", "0.05",
		"MATE_HTTP_ADDR", "127.0.0.1:9999",
		"MATE_DATA_DIR", "/tmp/mate",
		"MATE_LLM_MODEL", "deepseek-chat",
		"MATE_MEMORY_AUTO_SUMMARIZE_ENABLED", "false",
		"MATE_AGENT_CONVERSATION_WINDOW_COMPACT_TRIGGER_RATIO", "0.5",
		"MATE_AGENT_CONVERSATION_WINDOW_DEFAULT_MAX_INPUT_TOKENS", " 64000 ",
		"MATE_AUTH_KEYS", "k1-0123456789abcdef=1,2;ops-0123456789abcdef=admin;all-0123456789abcdef=*",
		"MATE_LANGUAGE", "en",
	))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Mate
	if d := m.Memory.CooldownMinutes.Duration(); d != 3*time.Second {
		t.Errorf("cooldown 0.05 min = %v, want 3s", d)
	}
	if m.HTTP.Addr != "127.0.0.1:9999" || m.DataDir != "/tmp/mate" || m.LLM.Model != "deepseek-chat" || m.Memory.AutoSummarizeEnabled || m.Language != "en" {
		t.Errorf("overrides not applied: %+v", m)
	}
	if w := m.Agent.Conversation.Window; w.CompactTriggerRatio != 0.5 || w.DefaultMaxInputTokens != 64000 {
		t.Errorf("window overrides: %+v", w)
	}
	k := m.Auth.Keys
	if len(k) != 3 || k[0].Key != "k1-0123456789abcdef" || strings.Join(k[0].Agents, ",") != "1,2" || !k[1].Admin || k[2].Agents[0] != "*" {
		t.Errorf("keys: %+v", k)
	}
}

func TestOpenAIAliases(t *testing.T) {
	cfg, err := config.Load("", env("OPENAI_BASE_URL", "https://api.deepseek.com/v1", "OPENAI_API_KEY", "sk-test"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mate.LLM.BaseURL != "https://api.deepseek.com/v1" || cfg.Mate.LLM.APIKey != "sk-test" || !cfg.LLMConfigured() {
		t.Fatalf("aliases not applied: %+v", cfg.Mate.LLM)
	}
	// The project's own name wins over the conventional alias.
	cfg, err = config.Load("", env("OPENAI_BASE_URL", "https://a.example/v1", "MATE_LLM_BASE_URL", "https://b.example/v1"))
	if err != nil || cfg.Mate.LLM.BaseURL != "https://b.example/v1" {
		t.Fatalf("MATE_LLM_BASE_URL should win: %q %v", cfg.Mate.LLM.BaseURL, err)
	}
	_, err = config.Load("", env("OPENAI_BASE_URL", "api.example.com"))
	if err == nil || !strings.Contains(err.Error(), "mate.llm.base-url") {
		t.Fatalf("a base URL without scheme: %v", err)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestYAMLFile(t *testing.T) {
	p := writeFile(t, `
mate:
  language: en
  memory:
    cooldown-minutes: 0.5
    emergence-day-range: 3
  agent:
    conversation:
      window:
        preserve-recent-pairs: 4
  auth:
    keys:
      - key: s3cret-0123456789abcdef
        agents: ["1", "2"]
`)
	cfg, err := config.Load(p, env("MATE_MEMORY_EMERGENCE_DAY_RANGE", "5"))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Mate
	if m.Language != "en" || m.Memory.CooldownMinutes.Duration() != 30*time.Second || m.Agent.Conversation.Window.PreserveRecentPairs != 4 {
		t.Errorf("file values not applied: %+v", m)
	}
	if m.Memory.EmergenceDayRange != 5 {
		t.Errorf("environment should override the file: %d", m.Memory.EmergenceDayRange)
	}
	if m.Memory.MinMessagesForSummarize != 4 {
		t.Errorf("keys absent from the file must keep their defaults: %d", m.Memory.MinMessagesForSummarize)
	}
	if len(m.Auth.Keys) != 1 || m.Auth.Keys[0].Key != "s3cret-0123456789abcdef" {
		t.Errorf("keys from file: %+v", m.Auth.Keys)
	}
	if _, err := config.Load(writeFile(t, ""), env()); err != nil {
		t.Errorf("an empty file should mean defaults: %v", err)
	}

	_, err = config.Load(writeFile(t, "mate:\n  memory:\n    cooldown-minute: 3\n"), env())
	if err == nil || !strings.Contains(err.Error(), "cooldown-minute") {
		t.Fatalf("unknown key: %v, want an error naming it", err)
	}
	_, err = config.Load(writeFile(t, "mate:\n  memory:\n    cooldown-minutes: soon\n"), env())
	if err == nil || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("bad value in file: %v", err)
	}
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml"), env()); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestBadValuesNameTheKey(t *testing.T) {
	cases := []struct {
		env  []string
		want []string // every part must appear in the error
	}{
		{[]string{"MATE_MEMORY_COOLDOWN_MINUTES", "abc"}, []string{"MATE_MEMORY_COOLDOWN_MINUTES", "mate.memory.cooldown-minutes", "not a number"}},
		{[]string{"MATE_MEMORY_COOLDOWN_MINUTES", "-1"}, []string{"mate.memory.cooldown-minutes", "0 or more"}},
		{[]string{"MATE_MEMORY_MIN_MESSAGES_FOR_SUMMARIZE", "4.5"}, []string{"MATE_MEMORY_MIN_MESSAGES_FOR_SUMMARIZE", "whole number"}},
		{[]string{"MATE_MEMORY_AUTO_SUMMARIZE_ENABLED", "yes please"}, []string{"MATE_MEMORY_AUTO_SUMMARIZE_ENABLED", "true or false"}},
		{[]string{"MATE_LANGUAGE", "fr"}, []string{"mate.language", "MATE_LANGUAGE", "accepted: zh, en"}},
		{[]string{"MATE_TIMEZONE", "Mars/Base"}, []string{"mate.timezone", "IANA"}},
		{[]string{"MATE_HTTP_ADDR", "8080"}, []string{"mate.http.addr", "host:port"}},
		{[]string{"MATE_DATABASE_DRIVER", "postgres"}, []string{"mate.database.driver", "accepted: sqlite, mysql"}},
		{[]string{"MATE_DATABASE_DRIVER", "mysql"}, []string{"mate.database.dsn", "required"}},
		{[]string{"MATE_DATA_DIR", ""}, []string{"mate.data-dir", "must not be empty"}},
		{[]string{"MATE_AGENT_CONVERSATION_WINDOW_COMPACT_TRIGGER_RATIO", "1.5"}, []string{"mate.agent.conversation.window.compact-trigger-ratio", "(0, 1]"}},
		{[]string{"MATE_AGENT_CONVERSATION_WINDOW_DEFAULT_MAX_INPUT_TOKENS", "0"}, []string{"default-max-input-tokens", "greater than 0"}},
		{[]string{"MATE_MEMORY_EMERGENCE_CRON", "every night"}, []string{"mate.memory.emergence-cron", "5-field"}},
		{[]string{"MATE_MEMORY_MAX_FILE_BYTES", "0"}, []string{"mate.memory.max-file-bytes"}},
		{[]string{"MATE_MEMORY_BUDGET_MEMORY_TOKENS", "0"}, []string{"mate.memory.budget.memory-tokens", "1 to 1000000"}},
		{[]string{"MATE_MEMORY_BUDGET_PROFILE_TOKENS", "2000000"}, []string{"mate.memory.budget.profile-tokens", "1 to 1000000"}},
		{[]string{"MATE_NATS_REPLICAS", "2"}, []string{"mate.nats.replicas", "accepted: 1, 3, 5"}},
		{[]string{"MATE_AUTH_KEYS", "justakey"}, []string{"MATE_AUTH_KEYS", "key=agentIds"}},
		{[]string{"MATE_AUTH_KEYS", "k-0123456789abcdef=abc"}, []string{"mate.auth.keys", "positive agent id or *"}},
		{[]string{"MATE_AUTH_KEYS", "x=*"}, []string{"mate.auth.keys", "key #1 is 1 characters; at least 16"}},
		{[]string{"MATE_NATS_EMBEDDED_LISTEN", "0.0.0.0:4222"}, []string{"mate.nats.embedded-listen", "not a loopback address", "mate.nats.user"}},
		{[]string{"MATE_NATS_USER", "mate"}, []string{"mate.nats.password", "set both or neither"}},
		{[]string{"MATE_NATS_CREDS_FILE", "/x.creds"}, []string{"mate.nats.creds-file", "external NATS"}},
		{[]string{"MATE_NATS_TLS_CERT_FILE", "/c.pem"}, []string{"mate.nats.tls.key-file", "set both or neither"}},
		{[]string{"MATE_LLM_MODEL", ""}, []string{"mate.llm.model", "must not be empty"}},
		{[]string{"MATE_MEMORY_SEARCH_SOURCES", "files,emails"}, []string{"mate.memory.search.sources", `"emails" is not a source`}},
		{[]string{"MATE_MEMORY_SEARCH_SOURCES", "conversations"}, []string{"mate.memory.search.sources", "files must be a source"}},
	}
	for _, c := range cases {
		_, err := config.Load("", env(c.env...))
		if err == nil {
			t.Errorf("%v: accepted", c.env)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", c.env, err, w)
			}
		}
	}
	// Every problem is reported at once.
	_, err := config.Load("", env("MATE_LANGUAGE", "fr", "MATE_NATS_REPLICAS", "2"))
	if err == nil || !strings.Contains(err.Error(), "mate.language") || !strings.Contains(err.Error(), "mate.nats.replicas") {
		t.Errorf("two bad values: %v", err)
	}
}

func TestParseKeys(t *testing.T) {
	keys, err := config.ParseKeys(" a=1 ; b = * ;c=admin,3;; ")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0].Key != "a" || keys[1].Agents[0] != "*" || !keys[2].Admin || keys[2].Agents[0] != "3" {
		t.Fatalf("%+v", keys)
	}
	for _, bad := range []string{"=1", "a=", "a"} {
		if _, err := config.ParseKeys(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:80": true, "[::1]:8080": true, "127.0.0.2:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.5:8080": false, "[::]:80": false, "example.com:80": false, "bad": false,
	} {
		if got := config.LoopbackOnly(addr); got != want {
			t.Errorf("LoopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}
