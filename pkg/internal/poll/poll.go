// Package poll waits in tests for a condition to hold: it checks the condition at an interval
// until a deadline and fails the test, saying what it waited for, when the deadline passes
// (STYLE: no time.Sleep to wait for something; poll with a deadline).
package poll

import (
	"testing"
	"time"
)

// DefaultInterval is how often a condition is checked unless Every says otherwise.
const DefaultInterval = 10 * time.Millisecond

// Option changes how a wait polls.
type Option func(*waiter)

type waiter struct{ interval time.Duration }

// Every checks the condition every d instead of DefaultInterval (a condition that asks other
// processes over the network wants a slower pace).
func Every(d time.Duration) Option { return func(w *waiter) { w.interval = d } }

// Until checks cond until it holds; when timeout passes first it fails t with what it waited
// for.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool, opts ...Option) {
	t.Helper()
	UntilReason(t, timeout, what, func() (bool, string) { return cond(), "" }, opts...)
}

// UntilReason is Until for a condition that also says what it saw: the failure carries the
// last reason it gave.
func UntilReason(t testing.TB, timeout time.Duration, what string, cond func() (bool, string), opts ...Option) {
	t.Helper()
	w := waiter{interval: DefaultInterval}
	for _, o := range opts {
		o(&w)
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		ok, reason := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if reason != "" {
				reason = ": " + reason
			}
			t.Fatalf("timed out after %s waiting for %s%s", timeout, what, reason)
			return
		}
		<-tick.C
	}
}
