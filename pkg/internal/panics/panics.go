// Package panics stops a panic in a goroutine that serves outside input (a request, an MCP
// session, a message, a change notification) from taking the process down: the panic is
// recovered, logged with its context and stack, and counted, and the goroutine's owner goes
// on with the next piece of work.
package panics

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricName is the counter of recovered panics, labelled by where they happened.
const MetricName = "matememory_panics_recovered_total"

// Guard recovers, logs and counts panics. The zero value and a nil *Guard work: they
// recover and log to slog's default logger, and count nothing.
type Guard struct {
	log   *slog.Logger
	count *prometheus.CounterVec
}

// New returns a guard that logs to log and counts on reg (either may be nil). A registry
// takes one guard: a second New on the same registry shares the first one's counter.
func New(log *slog.Logger, reg prometheus.Registerer) *Guard {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "Panics recovered in goroutines that serve requests, MCP sessions, messages or notifications, by where (the process went on).",
	}, []string{"where"})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					c = existing
				}
			}
		}
	}
	return &Guard{log: log, count: c}
}

// Error is a recovered panic as an error.
type Error struct {
	Where string
	Value any
	Stack []byte
}

func (e *Error) Error() string { return fmt.Sprintf("panic in %s: %v", e.Where, e.Value) }

// Recover, deferred directly (`defer g.Recover("mcp.hub", "agent", id)`), stops a panic of
// the calling goroutine, logs it with attrs and its stack, and counts it.
func (g *Guard) Recover(where string, attrs ...any) {
	if v := recover(); v != nil {
		g.record(&Error{Where: where, Value: v, Stack: debug.Stack()}, attrs)
	}
}

// Report logs and counts a panic value that the caller recovered itself (when its own
// deferred function must also answer for the panic, as an HTTP handler's writes a 500).
func (g *Guard) Report(where string, v any, attrs ...any) {
	g.record(&Error{Where: where, Value: v, Stack: debug.Stack()}, attrs)
}

// Do runs fn and returns its panic, recovered, logged and counted, as an *Error (nil when
// fn returned normally).
func (g *Guard) Do(where string, fn func(), attrs ...any) (err error) {
	defer func() {
		if v := recover(); v != nil {
			e := &Error{Where: where, Value: v, Stack: debug.Stack()}
			g.record(e, attrs)
			err = e
		}
	}()
	fn()
	return nil
}

// HTTP recovers a panic of h: it is logged and counted (where "http"), and the caller gets
// a 500 when nothing was written yet; the server goes on. http.ErrAbortHandler, the
// deliberate way to abort a response, passes through.
func (g *Guard) HTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			g.Report("http", v, "method", r.Method, "path", r.URL.Path)
			http.Error(w, "internal error", http.StatusInternalServerError)
		}()
		h.ServeHTTP(w, r)
	})
}

// Go runs fn on a new goroutine whose panic is recovered, logged and counted.
func (g *Guard) Go(where string, fn func(), attrs ...any) {
	go func() {
		defer g.Recover(where, attrs...)
		fn()
	}()
}

// Count is the number of panics recovered at where (for tests and the console).
func (g *Guard) Count(where string) float64 {
	if g == nil || g.count == nil {
		return 0
	}
	var m dto.Metric
	if err := g.count.WithLabelValues(where).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

func (g *Guard) record(e *Error, attrs []any) {
	log := slog.Default()
	if g != nil && g.log != nil {
		log = g.log
	}
	args := append([]any{"where", e.Where, "panic", fmt.Sprint(e.Value)}, attrs...)
	args = append(args, "stack", string(e.Stack))
	log.Error("panic recovered; the process goes on", args...)
	if g != nil && g.count != nil {
		g.count.WithLabelValues(e.Where).Inc()
	}
}
