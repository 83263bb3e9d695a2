package goclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/apptest"
)

// Issue 12.4: a user waits for an event's outcome with one call, no polling loop.
func TestWaitRun(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	e := &event.ConversationCompletedEvent{AgentID: 4, ConversationID: "c-wait", UserMessage: "Remember that my build server is ci-07.example",
		AssistantReply: "Noted.", MessageCount: 4, TriggerSource: event.TriggerWeb, Messages: []event.Message{
			{Role: "user", Content: "hello, I keep the builds running"}, {Role: "assistant", Content: "hi"},
			{Role: "user", Content: "Remember that my build server is ci-07.example"}, {Role: "assistant", Content: "Noted."}}}
	ack, err := c.PublishCompletion(ctx(t), e)
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.WaitRun(ctx(t), 4, ack.EventID, client.WithPollInterval(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !run.Final() || run.EventID != ack.EventID || (run.Status != client.StatusCompleted && run.Status != client.StatusSkipped) {
		t.Fatalf("run %+v", run)
	}
	// An event that never ran: the wait ends with ctx, saying so.
	short, cancel := contextWithTimeout(300 * time.Millisecond)
	defer cancel()
	if _, err := c.WaitRun(short, 4, "never-published"); err == nil || !strings.Contains(err.Error(), "no run yet") {
		t.Fatalf("waiting for an unknown event: %v", err)
	}
}

// Sentinel errors, the User-Agent, and the cron-job and dead-letter methods against the app.
func TestSentinelsCronAndDeadLetters(t *testing.T) {
	a := apptest.Start(t, "agent-key-0123456789=4;admin-key-0123456789=admin,*")
	c := newClient(t, a, "agent-key-0123456789")
	adm := newClient(t, a, "admin-key-0123456789")
	if _, err := c.ReadFile(ctx(t), 4, "nope.md"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := c.ReadFile(ctx(t), 5, "MEMORY.md"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("other agent: %v", err)
	}
	if _, err := c.CreateFile(ctx(t), 4, "MEMORY.md", "x"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("create-only over a seeded file: %v", err)
	}
	if _, err := c.DeadLetters(ctx(t), client.DeadLetterFilter{}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("dead letters with an agent key: %v", err)
	}
	if dl, err := adm.DeadLetters(ctx(t), client.DeadLetterFilter{Limit: 10}); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters: %v %v", dl, err)
	}
	if _, err := adm.RetryDeadLetter(ctx(t), 999); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("retry of a missing dead letter: %v", err)
	}

	agent, name, expr, typ, msg := int64(4), "standup", "0 9 * * 1-5", "text", "Time for the standup"
	j, err := c.CreateCronJob(ctx(t), client.CronJobInput{AgentID: &agent, Name: &name, CronExpression: &expr, TaskType: &typ, TriggerMessage: &msg})
	if err != nil || j.ID == 0 || j.NextRunTime == nil {
		t.Fatalf("create cron job: %+v %v", j, err)
	}
	bad := "every day"
	if _, err := c.CreateCronJob(ctx(t), client.CronJobInput{AgentID: &agent, Name: &name, CronExpression: &bad, TaskType: &typ, TriggerMessage: &msg}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("bad expression: %v", err)
	}
	off := false
	if u, err := c.UpdateCronJob(ctx(t), j.ID, client.CronJobInput{Enabled: &off}); err != nil || u.Enabled {
		t.Fatalf("disable: %+v %v", u, err)
	}
	jobs, err := c.CronJobs(ctx(t), client.CronJobFilter{AgentID: 4})
	if err != nil || len(jobs) != 2 { // the seeded consolidation job and ours
		t.Fatalf("cron jobs: %+v %v", jobs, err)
	}
	if err := c.DeleteCronJob(ctx(t), j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CronJob(ctx(t), j.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
