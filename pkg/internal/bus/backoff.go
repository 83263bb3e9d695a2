package bus

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff is how long a redelivery waits after a failed attempt: Initial after the first
// delivery, doubling with each delivery up to Max, each delay spread by ±Jitter (0.2: 80 % to
// 120 %) so that messages failed together do not come back together. It is the one backoff
// of the message runtime and its handlers (summarizer, emergence, recall indexer), built on
// cenkalti/backoff's exponential backoff.
type Backoff struct {
	Initial, Max time.Duration
	// Jitter is the randomization factor (0: exact delays).
	Jitter float64
}

// Delay is the wait before the delivery that follows delivery attempt (1 for the first):
// min(Initial × 2^(attempt-1), Max), spread by Jitter. An attempt below 1 counts as 1; a Max
// of 0 is no cap.
func (b Backoff) Delay(attempt int) time.Duration {
	if b.Initial <= 0 {
		return 0
	}
	maxD := b.Max
	if maxD <= 0 {
		maxD = time.Duration(1<<62 - 1) // no cap
	}
	e := &backoff.ExponentialBackOff{InitialInterval: min(b.Initial, maxD), RandomizationFactor: b.Jitter,
		Multiplier: 2, MaxInterval: maxD}
	e.Reset()
	var d time.Duration
	for i := 1; i <= max(attempt, 1); i++ {
		d = e.NextBackOff()
	}
	return d
}
