package summarizer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// watermarkOf is conv's watermark, and whether it has one.
func (h *harness) watermarkOf(agentID int64, conv string) (int64, bool) {
	h.t.Helper()
	var rows []store.ExtractionWatermark
	if err := h.db.DB.Where("agent_id = ? AND conversation_id = ?", agentID, conv).Find(&rows).Error; err != nil {
		h.t.Fatal(err)
	}
	if len(rows) == 0 {
		return 0, false
	}
	return rows[0].LastMessageID, true
}

// TestExtractionRegistersInItsCommit: an extraction of a conversation never registered
// registers it in its own commit (no statement of its own), and that commit still holds
// when another event registered the conversation meanwhile, and fails as a whole, writing
// nothing, when another extraction covered it meanwhile.
func TestExtractionRegistersInItsCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake))
		svc := h.service("w1")
		for _, c := range []struct {
			agent  int64
			before func(agent int64) error // runs just before the commit
			stale  bool
		}{
			{agent: 1},
			{agent: 2, before: func(agent int64) error { return svc.d.Messages.Register(ctx, agent, "c1", time.Now()) }},
			{agent: 3, stale: true, before: func(agent int64) error {
				return h.db.DB.Create(&store.ExtractionWatermark{AgentID: agent, ConversationID: "c1", LastMessageID: 1 << 40}).Error
			}},
		} {
			h.conversation(c.agent, "c1", fmt.Sprintf("t%d-1", c.agent), 4)
			if _, ok := h.watermarkOf(c.agent, "c1"); ok {
				t.Fatalf("agent %d: registered before its event", c.agent)
			}
			svc.hookBeforeCommit = nil
			var before string // what the commit finds
			if c.before != nil {
				svc.hookBeforeCommit = func() error {
					err := c.before(c.agent)
					before = h.fileSnapshot()
					return err
				}
			}
			res := svc.Handle(ctx, JobFromEvent(completed(c.agent, "c1", "e1", 4)))
			wm, ok := h.watermarkOf(c.agent, "c1")
			if c.stale {
				if res.Status != store.RunFailed || !res.Retry || !strings.Contains(res.Reason, "extracted meanwhile") {
					t.Fatalf("agent %d: %s %q retry=%v, want a retried failure: covered meanwhile", c.agent, res.Status, res.Reason, res.Retry)
				}
				if wm != 1<<40 {
					t.Fatalf("agent %d: watermark %d, want the other extraction's", c.agent, wm)
				}
				if after := h.fileSnapshot(); after != before {
					t.Fatalf("agent %d: a stale extraction wrote:\n%s", c.agent, after)
				}
				continue
			}
			if res.Status != store.RunCompleted || !res.Covered {
				t.Fatalf("agent %d: %s %q", c.agent, res.Status, res.Reason)
			}
			var last int64
			h.db.DB.Model(&store.Message{}).Where("agent_id = ? AND conversation_id = ?", c.agent, "c1").Select("MAX(id)").Scan(&last)
			if !ok || wm != last {
				t.Fatalf("agent %d: watermark %d (registered %v), want %d", c.agent, wm, ok, last)
			}
		}
	})
}

// TestDeadLetteredJobRegistersItsConversation: a job whose extraction fails for good
// leaves its conversation registered, so the agent's next extraction covers it even if
// nobody retries the dead letter.
func TestDeadLetteredJobRegistersItsConversation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply { return llmtest.Reply{Status: 400, Content: "invalid model"} })
		h := newHarness(t, db, withLLM(fake))
		svc := h.service("w1")
		h.conversation(5, "c1", "t5-1", 4)
		res := svc.Handle(ctx, JobFromEvent(completed(5, "c1", "e1", 4)))
		if !res.DeadLetter {
			t.Fatalf("%s %q, want a dead letter", res.Status, res.Reason)
		}
		if wm, ok := h.watermarkOf(5, "c1"); !ok || wm != 0 {
			t.Fatalf("watermark %d (registered %v), want registered at 0", wm, ok)
		}
		fake.SetHandler(echoLLM)
		h.conversation(5, "c2", "t5-2", 4)
		res = svc.Handle(ctx, JobFromEvent(completed(5, "c2", "e2", 4)))
		if res.Status != store.RunCompleted {
			t.Fatalf("next event: %s %q", res.Status, res.Reason)
		}
		daily, _ := h.file(5, "memory/"+h.now().UTC().Format("2006-01-02")+".md")
		if !strings.Contains(daily.Content, "covered t5-1") || !strings.Contains(daily.Content, "covered t5-2") {
			t.Fatalf("the next extraction left the dead-lettered conversation out:\n%s", daily.Content)
		}
	})
}
