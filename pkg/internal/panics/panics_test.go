package panics

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRecoverLogsAndCounts(t *testing.T) {
	var buf bytes.Buffer
	reg := prometheus.NewRegistry()
	g := New(slog.New(slog.NewTextHandler(&buf, nil)), reg)

	func() {
		defer g.Recover("test.recover", "agent", 5)
		panic("boom")
	}()
	if got := g.Count("test.recover"); got != 1 {
		t.Fatalf("count = %v, want 1", got)
	}
	for _, want := range []string{"where=test.recover", "panic=boom", "agent=5", "stack="} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}

	err := g.Do("test.do", func() { panic(errors.New("bad")) })
	var pe *Error
	if !errors.As(err, &pe) || pe.Where != "test.do" || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("Do = %v, want the panic as *Error", err)
	}
	if err := g.Do("test.do", func() {}); err != nil {
		t.Fatalf("Do without a panic = %v", err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	g.Go("test.go", func() { defer wg.Done(); panic("in a goroutine") })
	wg.Wait()
	// The deferred Done runs before Recover: poll for the count.
	for deadline := time.Now().Add(5 * time.Second); g.Count("test.go") != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the goroutine's panic was not counted")
		}
	}

	// A second guard on the same registry shares the counter instead of failing.
	if got := New(nil, reg).Count("test.recover"); got != 1 {
		t.Fatalf("second guard's count = %v, want 1 (shared)", got)
	}
}

func TestNilGuardStillRecovers(t *testing.T) {
	var g *Guard
	func() {
		defer g.Recover("nil")
		panic("boom")
	}()
	if err := g.Do("nil", func() { panic(1) }); err == nil {
		t.Fatal("a nil guard's Do returned no error for a panic")
	}
	if g.Count("nil") != 0 {
		t.Fatal("a nil guard counts nothing")
	}
}
