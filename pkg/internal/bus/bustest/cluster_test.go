package bustest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An R3 stream keeps every acknowledged message through the loss and return of a node.
func TestClusterR3SurvivesNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := StartCluster(t, 3)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	acked := 0
	for i := 0; i < 200; i++ {
		if i == 50 {
			c.Kill(1)
		}
		if i == 150 {
			c.Restart(1)
		}
		for attempt := 0; attempt < 50; attempt++ {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := js.Publish(pctx, "t.x", []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint(i)))
			pcancel()
			if err == nil {
				acked++
				break
			}
		}
	}
	if acked != 200 {
		t.Fatalf("acked %d of 200", acked)
	}
	var info *jetstream.StreamInfo
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s, err := js.Stream(ctx, "T")
		if err == nil {
			if info, err = s.Info(ctx); err == nil && info.State.Msgs == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("stream holds %v messages, want 200", info)
}
