package erasure

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// Scopes of a Notice.
const (
	ScopeAgent        = "agent"
	ScopeConversation = "conversation"
)

// Notice tells every process that an agent, or one of its conversations, was erased: each
// drops what it caches of the agent (which agents it has seeded, their search snapshots, MCP
// sessions, context-window memos). A conversation's id is not in it: what a process caches
// of a conversation it drops with the agent's.
type Notice struct {
	AgentID  int64     `json:"agentId"`
	Scope    string    `json:"scope"`
	ErasedAt time.Time `json:"erasedAt"`
}

// Provision creates MATE_ERASURES (idempotent): every process that announces or listens.
func Provision(ctx context.Context, js jetstream.JetStream, replicas int) error {
	_, err := bus.EnsureStream(ctx, js, bus.ErasuresStreamConfig(replicas))
	return err
}

// announce publishes the notice, once the erasure has committed: a process that drops its
// caches on it then reads the database as the erasure left it.
func (s *Service) announce(ctx context.Context, n Notice) error {
	if s.d.JS == nil {
		return nil
	}
	// Provisioned here too: every process that listens has created it, unless none runs.
	if err := Provision(ctx, s.d.JS, s.d.Replicas); err != nil {
		return fmt.Errorf("tell the other processes of agent %d's erasure: %w", n.AgentID, err)
	}
	b, _ := json.Marshal(n)
	if _, err := s.d.JS.Publish(ctx, bus.AgentSubject(bus.SubjectErasure, n.AgentID), b); err != nil {
		return fmt.Errorf("tell the other processes of agent %d's erasure on %s: %w", n.AgentID, bus.StreamErasures, err)
	}
	return nil
}

// Listen calls fn with every notice published from now on, in order, until stop is called.
// It provisions MATE_ERASURES (replicas) and reads MATE_ERASURES from an ordered consumer: after a disconnect the consumer is
// recreated from the last notice seen, so none is missed while the stream keeps it (a day).
// fn runs on the consumer's goroutine; it must not block for long and should recover its
// own panics.
func Listen(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger, fn func(Notice)) (stop func(), err error) {
	st, err := bus.EnsureStream(ctx, js, bus.ErasuresStreamConfig(replicas))
	if err != nil {
		return nil, err
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SubjectErasure + ".>"},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", bus.StreamErasures, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var n Notice
		if err := json.Unmarshal(m.Data(), &n); err != nil || n.AgentID <= 0 || m.Subject() != bus.AgentSubject(bus.SubjectErasure, n.AgentID) {
			log.Warn("erasure: unreadable notice ignored", "subject", m.Subject(), "err", err)
			return
		}
		fn(n)
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		log.Debug("erasure: notice consumer", "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", bus.StreamErasures, err)
	}
	return cc.Stop, nil
}
