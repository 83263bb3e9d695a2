package fault_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/fault"
)

// TestKinds: every error of the vocabulary matches its kind through wrapping, a package's
// own sentinel made with New matches both itself and its kind, and no error matches another
// kind.
func TestKinds(t *testing.T) {
	own := fault.New(fault.ErrNotFound, "cron job not found")
	cause := errors.New("nats: timeout")
	kinds := []error{fault.ErrInvalid, fault.ErrNotFound, fault.ErrConflict, fault.ErrPrecondition,
		fault.ErrErased, fault.ErrTooLarge, fault.ErrUnavailable, fault.ErrRateLimited}
	for _, c := range []struct {
		err  error
		kind error
		msg  string
	}{
		{fmt.Errorf("load: %w", fault.Invalidf("name %q is empty", "")), fault.ErrInvalid, `load: name "" is empty`},
		{fmt.Errorf("%w: 7", own), fault.ErrNotFound, "cron job not found: 7"},
		{fault.Errorf(fault.ErrConflict, "a.md changed"), fault.ErrConflict, "a.md changed"},
		{fault.Wrap(fault.ErrUnavailable, cause, "not stored"), fault.ErrUnavailable, "not stored"},
		{&fault.Limited{Msg: "try later", RetryAfter: time.Second}, fault.ErrRateLimited, "try later"},
	} {
		for _, k := range kinds {
			if got := errors.Is(c.err, k); got != (k == c.kind) {
				t.Errorf("%v: errors.Is(%v) = %v", c.err, k, got)
			}
		}
		if c.err.Error() != c.msg {
			t.Errorf("%q, want %q", c.err.Error(), c.msg)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", own), own) {
		t.Error("a package's sentinel no longer matches itself")
	}
	if !errors.Is(fault.Wrap(fault.ErrUnavailable, cause, "not stored"), cause) {
		t.Error("Wrap lost its cause")
	}
	var inv *fault.Invalid
	if !errors.As(fmt.Errorf("x: %w", fault.Invalidf("bad")), &inv) || inv.Msg != "bad" {
		t.Errorf("errors.As: %v", inv)
	}
}
