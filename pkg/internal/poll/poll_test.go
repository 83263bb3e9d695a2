package poll

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message instead of stopping the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntil(t *testing.T) {
	calls := 0
	Until(t, time.Second, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

func TestUntilFailsAtTheDeadline(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	UntilReason(r, 50*time.Millisecond, "never", func() (bool, string) { return false, "still no" }, Every(5*time.Millisecond))
	if !strings.Contains(r.failed, "waiting for never: still no") {
		t.Fatalf("failure %q does not name what it waited for and the last reason", r.failed)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before the timeout", time.Since(start))
	}
}
