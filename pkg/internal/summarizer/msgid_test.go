package summarizer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestEventIDFromHeaders: a watermill publisher that carries the event id only as the
// message UUID (no eventId in the body) is processed under that id, not dead-lettered.
func TestEventIDFromHeaders(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t))
	h.conversation(5, "c1", "t5-1", 4)
	h.conversation(5, "c2", "t5-2", 4)
	h.worker(h.service("w1"))
	body := []byte(`{"agentId":5,"conversationId":"c1","userMessage":"how should we plan the release?","assistantReply":"ok","messageCount":4,"triggerSource":"web"}`)
	for _, m := range []*nats.Msg{
		// watermill-nats: the UUID header and, with TrackMsgId, Nats-Msg-Id.
		{Subject: event.CompletedSubject(5), Data: body, Header: nats.Header{event.HeaderWatermillUUID: {"wm-uuid-1"}, nats.MsgIdHdr: {"wm-uuid-1"}}},
		// Nats-Msg-Id alone, scoped by agent ("<agentId>:<id>").
		{Subject: event.CompletedSubject(5), Data: []byte(`{"agentId":5,"conversationId":"c2","userMessage":"how should we plan the release?","assistantReply":"ok","messageCount":4,"triggerSource":"web"}`),
			Header: nats.Header{nats.MsgIdHdr: {"5:msg-id-2"}}},
	} {
		if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 20*time.Second, "settled", h.settled)
	for _, id := range []string{"wm-uuid-1", "msg-id-2"} {
		runs := h.runs(id)
		if len(runs) == 0 || runs[0].Status != store.RunCompleted {
			t.Fatalf("event %s: runs %+v; want it processed under the header's id", id, runs)
		}
	}
	if s, err := h.js.Stream(context.Background(), bus.StreamDLQ); err == nil {
		if info, err := s.Info(context.Background()); err == nil && info.State.Msgs != 0 {
			t.Fatalf("%d dead letters", info.State.Msgs)
		}
	}
}
