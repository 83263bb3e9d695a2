package bus

import (
	"testing"
	"time"
)

// The one backoff reproduces the three formulas it replaced: the summarizer's (base doubling
// to a cap, ±20 % jitter), the emergence worker's (the same without jitter) and the recall
// indexer's (min(2^attempt s, 1 min)).
func TestBackoffDelay(t *testing.T) {
	old := func(base, limit time.Duration, attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < limit; i++ {
			d *= 2
		}
		return min(d, limit)
	}
	for _, c := range []struct{ base, limit time.Duration }{
		{2 * time.Second, 5 * time.Minute}, {10 * time.Second, 5 * time.Minute}, {2 * time.Second, 30 * time.Second},
		{time.Second, time.Second}, {3 * time.Second, 2 * time.Second}, {7 * time.Millisecond, 5 * time.Minute},
	} {
		for attempt := 0; attempt <= 30; attempt++ {
			want := old(c.base, c.limit, max(attempt, 1))
			if got := (Backoff{Initial: c.base, Max: c.limit}).Delay(attempt); got != want {
				t.Errorf("Backoff{%s, %s}.Delay(%d) = %s, want %s", c.base, c.limit, attempt, got, want)
			}
			b := Backoff{Initial: c.base, Max: c.limit, Jitter: 0.2}
			for i := 0; i < 20; i++ {
				got := b.Delay(attempt)
				if lo, hi := time.Duration(float64(want)*0.8), time.Duration(float64(want)*1.2)+1; got < lo || got > hi {
					t.Fatalf("jittered Delay(%d) = %s, outside [%s, %s]", attempt, got, lo, hi)
				}
			}
		}
	}
	recall := Backoff{Initial: 2 * time.Second, Max: time.Minute}
	for attempt := uint64(1); attempt <= 20; attempt++ {
		want := min(time.Duration(1<<min(attempt, 8))*time.Second, time.Minute)
		if got := recall.Delay(int(attempt)); got != want {
			t.Errorf("recall Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
	if got := (Backoff{}).Delay(3); got != 0 {
		t.Errorf("zero backoff: %s", got)
	}
}
