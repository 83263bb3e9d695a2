package app

import (
	"context"
	"github.com/matememory/matememory/pkg/internal/rest"
	"time"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/window"
)

// buildWindow serves the context window (POST …/conversations/{id}/context and …/retry) on
// processes that run the API.
func (a *App) buildWindow(ctx context.Context) error {
	if !a.Has(TargetAPI) {
		return nil
	}
	m := a.Cfg.Mate
	client := a.llmClient(llm.Config{BaseURL: m.LLM.BaseURL, APIKey: m.LLM.APIKey, Model: m.LLM.Model,
		Timeout: config.Seconds(m.LLM.TimeoutSeconds)})
	// A replica may hold a summary's in-flight marker for one LLM call (renewed per chunk);
	// the others wait that long before degrading.
	lockTTL := config.Seconds(m.LLM.TimeoutSeconds) + 30*time.Second
	opts := []window.Option{window.WithReplicas(m.NATS.Replicas), window.WithRegisterer(a.Registry), window.WithLockTTL(lockTTL),
		window.WithClock(a.Now), window.WithTracing(a.messaging())}
	if a.Recall != nil {
		opts = append(opts, window.WithRecall(a.Recall))
	}
	svc, err := window.New(ctx, m.Agent.Conversation.Window, window.Deps{
		JS: a.JS, History: window.StoreHistory{Messages: a.Messages}, Workspace: a.Workspace, Watermarks: a.Messages,
		LLM: client, Prompts: prompt.NewLoader(m.Prompts.Dir), Counter: a.Tokens, Log: a.Log,
	}, opts...)
	if err != nil {
		return err
	}
	a.parts.window = svc
	rest.RegisterContext(a.HTTP, svc)
	return nil
}
