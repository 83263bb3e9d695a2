package goclient_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
)

// An event waiting for the agent's cooldown shows in Pending, with its conversation; once a
// manual summarize extracted it, nothing waits.
func TestPending(t *testing.T) {
	fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply {
		b, _ := json.Marshal(map[string]any{"should_update": true, "reason": "test", "daily_entry": "- drinks green tea",
			"memory_update": "", "profile_update": ""})
		return llmtest.Reply{Content: string(b)}
	})
	// The default cooldown (5 minutes) outlasts the test.
	a := apptest.Start(t, "k1=1;k2=2", func(cfg *config.Config) {
		cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	})
	requireRoute(t, a, "GET", "/api/v1/agents/{agentId}/pending")
	c := newClient(t, a, "k1")
	publish := func(conv string) string {
		t.Helper()
		chat(t, c, 1, conv)
		e := &event.ConversationCompletedEvent{AgentID: 1, ConversationID: conv, UserMessage: "I am writing a compiler in Go this month.",
			AssistantReply: "A Go compiler project, this month. Good luck!", MessageCount: 4, TriggerSource: event.TriggerWeb}
		if _, err := c.PublishCompletion(ctx(t), e); err != nil {
			t.Fatal(err)
		}
		return e.EventID
	}
	pending := func() *client.Pending {
		t.Helper()
		p, err := c.Pending(ctx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var p *client.Pending
	// The run completes, then the worker releases the agent's lease with the cooldown in the
	// record: wait for that, the state the second event is meant to meet (an event arriving
	// while the lease is still held is deferred until it is free, not made the cooldown's
	// waiter).
	first := publish("c-1")
	waitRuns(t, c, 1, client.RunFilter{EventID: first}, func(r client.Run) bool { return r.Status == client.StatusCompleted })
	poll.UntilReason(t, 30*time.Second, "the lease released with the first run's cooldown", func() (bool, string) {
		p = pending()
		return p.Lease == nil && p.Cooldown != nil, fmt.Sprintf("%+v", p)
	})

	second := publish("c-2")
	poll.UntilReason(t, 30*time.Second, "the second event to wait for the cooldown", func() (bool, string) {
		p = pending()
		return p.Waiter != nil, fmt.Sprintf("%+v", p)
	})
	if p.State != client.PendingStateCooldown || p.Waiter.EventID != second || p.Cooldown == nil || !p.Cooldown.Until.After(p.Now) ||
		len(p.Conversations) != 1 || p.Conversations[0].ConversationID != "c-2" || p.Conversations[0].Messages != 4 || p.Summary == "" {
		t.Fatalf("pending during the cooldown: %+v", p)
	}
	if runs, err := c.Runs(ctx(t), 1, client.RunFilter{EventID: second}); err != nil || len(runs) != 0 {
		t.Fatalf("the waiting event's runs: %+v %v (a deferral has none)", runs, err)
	}

	if out, err := c.Summarize(ctx(t), 1, "c-2"); err != nil || out.Status != client.StatusCompleted {
		t.Fatalf("manual summarize: %+v %v", out, err)
	}
	// The summarize answers once its run completed; the worker releases the agent's lease
	// just after (the pending view says "leased" until then): wait for the release, then
	// nothing may wait.
	poll.UntilReason(t, 30*time.Second, "the lease released after the extraction", func() (bool, string) {
		p = pending()
		return p.State != client.PendingStateLeased, fmt.Sprintf("%+v", p)
	})
	if p.State != client.PendingStateIdle || p.Lease != nil || len(p.Conversations) != 0 || len(p.Coalesced) != 0 {
		t.Fatalf("pending after the extraction: %+v", p)
	}
	if _, err := c.Pending(ctx(t), 2); !client.IsForbidden(err) {
		t.Fatalf("another agent's pending work: err = %v", err)
	}
}
