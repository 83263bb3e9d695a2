package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestLogSettings(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cfg, err := Load("", env(map[string]string{"MATE_LOG_FORMAT": "json", "MATE_LOG_LEVEL": "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := cfg.Logger(&buf)
	log.Info("hidden")
	log.Warn("shown", "agent", 7)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["agent"] != float64(7) || strings.Contains(buf.String(), "hidden") {
		t.Fatalf("json warn logger wrote %q (%v)", buf.String(), err)
	}
	for _, c := range []struct{ k, v, want string }{
		{"MATE_LOG_FORMAT", "xml", "mate.log.format (env MATE_LOG_FORMAT): \"xml\" is not supported; accepted: text, json"},
		{"MATE_LOG_LEVEL", "loud", "mate.log.level (env MATE_LOG_LEVEL): \"loud\" is not supported; accepted: debug, info, warn, error"},
	} {
		if _, err := Load("", env(map[string]string{c.k: c.v})); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: %v; want %q", c.k, c.v, err, c.want)
		}
	}
}

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{"MATE_MEMORY_COOLDOWN_MINUTE=3", "MATE_LOG_LEVEL=info", "MATE_CONFIG=/etc/m.yaml",
		"MATE_TEST_MYSQL_DSN=x", "PATH=/bin", "MATE_NATS_URLS=nats://x", "OPENAI_API_KEY=k"})
	if strings.Join(got, ",") != "MATE_MEMORY_COOLDOWN_MINUTE,MATE_NATS_URLS" {
		t.Fatalf("unknown %v", got)
	}
	if s := Suggest("MATE_MEMORY_COOLDOWN_MINUTE"); s != "MATE_MEMORY_COOLDOWN_MINUTES" {
		t.Fatalf("suggestion %q", s)
	}
	if s := Suggest("MATE_SOMETHING_ELSE_ENTIRELY"); s != "" {
		t.Fatalf("suggestion for a far name: %q", s)
	}
}
