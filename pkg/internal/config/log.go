package config

import (
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
)

// parseLevel reads mate.log.level.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q; accepted: debug, info, warn, error", s)
}

// Logger builds the process's logger from mate.log.* (validated by Load).
func (c Config) Logger(w io.Writer) *slog.Logger {
	level, err := parseLevel(c.Mate.Log.Level)
	if err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Mate.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// otherEnv are MATE_ variables that are not settings but are read elsewhere.
var otherEnv = map[string]bool{"MATE_CONFIG": true}

// UnknownEnv lists the MATE_* variables of environ ("NAME=value" entries) that name no
// setting: a misspelt one (MATE_MEMORY_COOLDOWN_MINUTE) would otherwise be ignored
// silently. MATE_TEST_* (test settings) are not reported.
func UnknownEnv(environ []string) []string {
	known := map[string]bool{}
	for _, k := range Keys() {
		known[EnvName(k)] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MATE_") || strings.HasPrefix(name, "MATE_TEST_") || known[name] || otherEnv[name] {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Suggest names the setting closest to an unknown variable, if one is close enough.
func Suggest(name string) string {
	best, bestD := "", 4
	for _, k := range Keys() {
		if d := distance(name, EnvName(k)); d < bestD {
			best, bestD = EnvName(k), d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
