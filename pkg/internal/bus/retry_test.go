package bus_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Issue 9 points 12 and 21: processes started together against a cluster that cannot
// answer yet (two of three nodes down: no quorum) wait and retry, with a log line per
// attempt, within a bounded total wait; once the cluster is whole, concurrent
// provisioning of the same stream, consumer and bucket converges.
func TestProvisionWaitsForTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := bustest.StartCluster(t, 3)
	c.Kill(1)
	c.Kill(2)
	_, js := bustest.Connect(t, c.Dialer(), "provision-retry-test")
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	stream := jetstream.StreamConfig{Name: "T_FRESH", Subjects: []string{"t.fresh.>"}, Replicas: 3, Storage: jetstream.FileStorage}
	consumer := jetstream.ConsumerConfig{Durable: "fresh", AckPolicy: jetstream.AckExplicitPolicy}
	bucket := jetstream.KeyValueConfig{Bucket: "t_fresh", Replicas: 3, History: 1}

	// The total wait is bounded.
	short := bus.WithProvisionRetry(context.Background(), bus.ProvisionRetry{Log: log, MaxWait: 1500 * time.Millisecond,
		Attempt: 300 * time.Millisecond, Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond})
	start := time.Now()
	_, err := bus.EnsureStream(short, js, stream)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("no quorum: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %s, over its bound", took)
	}
	if n := strings.Count(logs.String(), "NATS not answering yet"); n < 2 {
		t.Fatalf("%d retry log lines:\n%s", n, logs)
	}

	// Six processes start together; the cluster becomes whole a few seconds later.
	ctx := bus.WithProvisionRetry(context.Background(), bus.ProvisionRetry{Log: log, MaxWait: time.Minute,
		Attempt: 2 * time.Second, Initial: 100 * time.Millisecond, Max: time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bus.EnsureStream(ctx, js, stream); err != nil {
				errs <- err
				return
			}
			if _, err := bus.EnsureConsumer(ctx, js, stream.Name, consumer); err != nil {
				errs <- err
				return
			}
			if _, err := bus.EnsureKeyValue(ctx, js, bucket); err != nil {
				errs <- err
			}
		}()
	}
	time.Sleep(2 * time.Second)
	c.Restart(1)
	c.Restart(2)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("provisioning once the cluster answered: %v", err)
	}
	s, err := js.Stream(context.Background(), stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(context.Background()); err != nil || info.Config.Replicas != 3 {
		t.Fatalf("stream: %+v %v", info, err)
	}
}

func TestUnavailableLeavesRefusalsAlone(t *testing.T) {
	js := jetStream(t)
	ctx := bus.WithProvisionRetry(context.Background(), bus.ProvisionRetry{MaxWait: time.Minute})
	if _, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "T_A", Subjects: []string{"t.same.>"}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Overlapping subjects: a refusal that will not change fails at once.
	_, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "T_B", Subjects: []string{"t.same.>"}})
	if err == nil || bus.Unavailable(err) || time.Since(start) > 2*time.Second {
		t.Fatalf("conflicting stream: %v after %s", err, time.Since(start))
	}
}
