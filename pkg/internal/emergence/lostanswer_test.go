package emergence_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestManualEmergenceLostAnswerReadFromTheLedger: the worker's answer is a core NATS
// message, and here it never comes (the caller's inbox has a custom prefix, which the
// worker does not answer); with the ledger, the trigger finds the run's outcome there within
// about a second instead of waiting out its whole wait.
func TestManualEmergenceLostAnswerReadFromTheLedger(t *testing.T) {
	f := newFixture(t, storetest.SQLite(t), func(r llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Content: `{"should_update": false, "reason": "nothing recurs"}`}
	})
	f.write(6, "memory/"+today.Format("2006-01-02")+".md", "# note\n\n- tea in the morning\n")
	nc, err := f.dial.Connect("lost-answer-api", nats.CustomInboxPrefix("_ELSEWHERE"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const wait = 30 * time.Second
	ctx := context.Background()

	start := time.Now()
	res, err := emergence.NewTrigger(js, wait).WithLedger(f.ledger).Run(ctx, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != store.RunSkipped || res.RunID == "" {
		t.Fatalf("result %+v; want skipped with the run's id", res)
	}
	if d := time.Since(start); d > wait/3 { // far below the wait, even on a loaded machine
		t.Fatalf("the outcome took %s; the ledger is read once a second", d)
	}
	runs := f.runs(6)
	if len(runs) != 1 || runs[0].RunID != res.RunID {
		t.Fatalf("runs %+v; want the one run answered", runs)
	}

	// Without the ledger the same lost answer is only a pending request.
	res, err = emergence.NewTrigger(js, time.Second).Run(ctx, 6, 0)
	if err != nil || res.Status != "pending" {
		t.Fatalf("without the ledger: %+v, %v; want pending", res, err)
	}
}
