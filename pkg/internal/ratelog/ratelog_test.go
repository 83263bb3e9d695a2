package ratelog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRateAndSuppressedCount(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), 50*time.Millisecond, 3)
	for i := 0; i < 10; i++ {
		l.Warn("llm failed", "agent", i)
	}
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("%d lines for 10 warnings with burst 3:\n%s", n, buf.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "\n") < 4 {
		if time.Now().After(deadline) {
			t.Fatal("no warning after the interval")
		}
		time.Sleep(10 * time.Millisecond)
		l.Warn("llm failed", "agent", 99)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &last); err != nil {
		t.Fatal(err)
	}
	if last["level"] != "WARN" || last["agent"] != float64(99) || last["suppressed"].(float64) < 7 {
		t.Fatalf("fourth line %v: want WARN, agent 99 and the 7+ warnings left out", last)
	}
}
