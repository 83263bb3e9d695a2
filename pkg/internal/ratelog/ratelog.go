// Package ratelog logs repeated warnings at a bounded rate: a failing dependency (the LLM
// down for an hour) shows in the log at once and then every so often, with how many
// warnings were left out meanwhile, instead of one line per retry.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Logger emits at most burst warnings at once and then one per interval; the ones left out
// are counted and reported as "suppressed" on the next one emitted.
type Logger struct {
	log        *slog.Logger
	mu         sync.Mutex
	lim        *rate.Limiter
	suppressed int
}

// New builds a Logger over log.
func New(log *slog.Logger, interval time.Duration, burst int) *Logger {
	return &Logger{log: log, lim: rate.NewLimiter(rate.Every(interval), burst)}
}

// Warn logs msg at WARN unless the rate is exceeded.
func (l *Logger) Warn(msg string, args ...any) {
	if l == nil || l.log == nil {
		return
	}
	l.mu.Lock()
	if !l.lim.Allow() {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.log.Log(context.Background(), slog.LevelWarn, msg, args...)
}
