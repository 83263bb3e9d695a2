package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/recall"
)

// natsWithAccounts starts a one-node JetStream server with compose/nats/accounts.conf, the
// users and permissions the deploys template.
func natsWithAccounts(t *testing.T) *server.Server {
	t.Helper()
	t.Setenv("NATS_API_PASSWORD", "api-password-0123456789")
	t.Setenv("NATS_WORKER_PASSWORD", "worker-password-0123456789")
	t.Setenv("NATS_CHAT_PASSWORD", "chat-password-0123456789")
	dir := t.TempDir()
	raw, err := os.ReadFile("compose/nats/accounts.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	body := "listen: 127.0.0.1:-1\njetstream { store_dir: \"" + filepath.Join(dir, "js") + "\" }\ninclude ./accounts.conf\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// compose/nats/nats.conf includes the same file.
	main, _ := os.ReadFile("compose/nats/nats.conf")
	if !strings.Contains(string(main), "include ./accounts.conf") {
		t.Fatal("compose/nats/nats.conf does not include ./accounts.conf: the cluster would take anonymous clients")
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("accounts.conf: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func process(t *testing.T, ns *server.Server, dataDir, target, user, password string) *app.App {
	t.Helper()
	cfg := config.Default()
	cfg.Mate.DataDir = dataDir
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.NATS.URL = ns.ClientURL()
	cfg.Mate.NATS.User, cfg.Mate.NATS.Password = user, password
	cfg.Mate.Memory.CooldownMinutes = 0
	a, err := app.New(context.Background(), app.Options{Targets: []string{target}, Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("%s as %s: %v", target, user, err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// connectAs connects as user; the function returned reports the permission errors the
// server sent, once those wanted (kind and subject pairs, as anyPermission takes them) have
// arrived, or after 5 s with those that did.
func connectAs(t *testing.T, ns *server.Server, user, password string) (*nats.Conn, func(want ...[2]string) []error) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc, func(want ...[2]string) []error {
		// The client hands the server's -ERR to the error handler on its own goroutine, so a
		// flush does not mean they arrived: poll for them.
		_ = nc.Flush()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := append([]error(nil), errs...)
			mu.Unlock()
			all := true
			for _, w := range want {
				all = all && anyPermission(got, w[0], w[1])
			}
			if all || time.Now().After(deadline) {
				return got
			}
		}
	}
}

// Issue 9.1: the deploys' NATS users and permissions: no anonymous client; the api and the
// workers run with their own users and process an event end to end; chat services may only
// publish events; the api erases an agent through its one read of MATE_EVENTS (the direct get by
// sequence) and cannot otherwise read the conversations; workers cannot forge events.
func TestNATSAccountsAndPermissions(t *testing.T) {
	ns := natsWithAccounts(t)
	if nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("an anonymous client was accepted")
	}
	data := t.TempDir()
	api := process(t, ns, data, app.TargetAPI, "matememory-api", "api-password-0123456789")
	process(t, ns, data, app.TargetSummarizer, "matememory-worker", "worker-password-0123456789")
	process(t, ns, t.TempDir(), app.TargetScheduler, "matememory-worker", "worker-password-0123456789")

	// A chat service publishes an event with its own user; the workers extract it.
	chat, chatErrs := connectAs(t, ns, "chat", "chat-password-0123456789")
	pub, err := eventpub.NewPublisher(chat, eventpub.WithSharedConn(), eventpub.WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := &event.ConversationCompletedEvent{EventID: "perm-1", AgentID: 5, ConversationID: "c1",
		UserMessage: "please remember that I deploy on Fridays", AssistantReply: "noted", MessageCount: 4,
		TriggerSource: event.TriggerWeb, Messages: []event.Message{
			{Role: "user", Content: "hello, I run the deployments"}, {Role: "assistant", Content: "hi"},
			{Role: "user", Content: "please remember that I deploy on Fridays"}, {Role: "assistant", Content: "noted"}}}
	if ack, err := pub.PublishCompleted(ctx, e); err != nil || ack.Duplicate {
		t.Fatalf("chat user publishing an event: %+v %v", ack, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		files, _ := api.Workspace.List(ctx, 5, "memory/")
		if len(files) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event was not extracted into a daily note by the worker user")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The api user reads the agent's record in the lease bucket (its pending view): the worker
	// wrote it when it took and released the lease. The note is written before the lease is
	// released, so the view may say "leased" for a moment: wait for the release.
	var pending struct {
		Msg  string `json:"msg"`
		Data struct {
			State string `json:"state"`
		} `json:"data"`
	}
	poll.UntilReason(t, 30*time.Second, "the worker's lease on agent 5 released", func() (bool, string) {
		resp, err := http.Get("http://" + api.Addr + "/api/v1/agents/5/pending")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&pending)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the api user reading agent 5's pending work: %d %+v %v", resp.StatusCode, pending, err)
		}
		return pending.Data.State != "leased", pending.Data.State
	})
	if pending.Data.State != "idle" {
		t.Fatalf("agent 5's pending work after the extraction: %+v, want idle", pending)
	}

	// The daily note is searchable through the api: the workers announce the change to the
	// indexer and the api hears the index notice, with their own users.
	deadline = time.Now().Add(30 * time.Second)
	for {
		res, err := api.Recall.Search(ctx, 5, recall.Query{Text: "Fridays"})
		if err == nil && len(res.Hits) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daily note was not found by search through the api user: %+v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The api process erases agent 5 under its own user (DELETE …?erase=true): the erasure
	// finds the agent's messages on MATE_EVENTS by direct get and securely deletes them, then
	// announces the erasure on MATE_ERASURES; every process (the api, the summarizer, the
	// scheduler, each with its own user) hears the notice from its own consumer.
	req, _ := http.NewRequest(http.MethodDelete, "http://"+api.Addr+"/api/v1/agents/5?erase=true&confirm=5", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var receipt struct {
		Msg  string `json:"msg"`
		Data struct {
			AgentID  int64            `json:"agentId"`
			Messages map[string]int64 `json:"messages"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&receipt)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || receipt.Data.AgentID != 5 {
		t.Fatalf("the api process erasing agent 5 under the api user: %d %+v %v", resp.StatusCode, receipt, err)
	}
	if n := receipt.Data.Messages[event.Stream]; n < 1 {
		t.Fatalf("the erasure erased %d of agent 5's messages on %s, want its event: %+v", n, event.Stream, receipt.Data)
	}
	ejs, _ := jetstream.New(api.NC)
	evs, err := ejs.Stream(ctx, event.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := evs.Info(ctx, jetstream.WithSubjectFilter("mate.*.*.5"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 0 {
		t.Fatalf("agent 5's messages stay on %s after its erasure: %v", event.Stream, info.State.Subjects)
	}
	es, err := ejs.Stream(ctx, "MATE_ERASURES")
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		heard := 0
		for ci := range es.ListConsumers(ctx).Info() {
			if ci.Delivered.Stream >= 1 {
				heard++
			}
		}
		if heard == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 processes heard the erasure's notice", heard)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Chat: no reading, no other subjects, no JetStream administration.
	if _, err := chat.SubscribeSync("mate.>"); err != nil {
		t.Fatal(err)
	}
	_ = chat.Publish("mate.memory.summarize.5", []byte(`{}`))
	if errs := chatErrs([2]string{"Subscription", "mate.>"}, [2]string{"Publish", "mate.memory.summarize.5"}); !anyPermission(errs, "Subscription", "mate.>") || !anyPermission(errs, "Publish", "mate.memory.summarize.5") {
		t.Fatalf("chat user: want permission violations for subscribing to mate.> and publishing a summarize request, got %v", errs)
	}
	cjs, _ := jetstream.New(chat)
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	if _, err := cjs.Stream(sctx, event.Stream); err == nil {
		t.Error("chat user read the stream's info")
	}
	cancel()

	// Outside the erasure's direct get, the api cannot read the conversations in MATE_EVENTS.
	apiNC, apiErrs := connectAs(t, ns, "matememory-api", "api-password-0123456789")
	ajs, _ := jetstream.New(apiNC)
	s, err := ajs.Stream(ctx, event.Stream)
	if err != nil {
		t.Fatalf("api user: stream info: %v", err)
	}
	// The erasure's direct get by sequence ($JS.API.DIRECT.GET.MATE_EVENTS) is the one read
	// granted; the other ways of getting a message stay denied.
	gctx, gcancel := context.WithTimeout(ctx, time.Second)
	if _, err := s.GetLastMsgForSubject(gctx, "mate.conversation.completed.6"); err == nil {
		t.Error("api user got the last message of a subject of MATE_EVENTS")
	}
	gcancel()
	if _, err := apiNC.Request("$JS.API.STREAM.MSG.GET."+event.Stream, []byte(`{"seq":1}`), time.Second); err == nil {
		t.Error("api user got a message of MATE_EVENTS from the stream leader")
	}
	if errs := apiErrs([2]string{"Publish", "$JS.API.DIRECT.GET." + event.Stream + ".mate.conversation.completed.6"}, [2]string{"Publish", "$JS.API.STREAM.MSG.GET." + event.Stream}); !anyPermission(errs, "Publish", "$JS.API.DIRECT.GET."+event.Stream+".mate.conversation.completed.6") || !anyPermission(errs, "Publish", "$JS.API.STREAM.MSG.GET."+event.Stream) {
		t.Errorf("api user getting messages of MATE_EVENTS but by the erasure's direct get: want permission violations, got %v", errs)
	}
	c, err := ajs.Consumer(ctx, event.Stream, "summarizer")
	if err != nil {
		t.Fatalf("api user: consumer info: %v", err)
	}
	if batch, err := c.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
		for m := range batch.Messages() {
			t.Errorf("api user fetched %s", m.Subject())
		}
	}
	if _, err := apiNC.SubscribeSync("mate.conversation.completed.>"); err != nil {
		t.Fatal(err)
	}
	if errs := apiErrs([2]string{"Subscription", "mate.conversation.completed.>"}); !anyPermission(errs, "Subscription", "mate.conversation.completed.>") {
		t.Errorf("api user subscribing to events: want a permission violation, got %v", errs)
	}

	// Workers cannot forge an event.
	wNC, _ := connectAs(t, ns, "matememory-worker", "worker-password-0123456789")
	wjs, _ := jetstream.New(wNC)
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	if _, err := wjs.Publish(pctx, "mate.conversation.completed.5", []byte(`{}`)); err == nil {
		t.Error("worker user published a conversation event")
	}
}

func anyPermission(errs []error, kind, subject string) bool {
	for _, err := range errs {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), kind) && strings.Contains(err.Error(), subject) {
			return true
		}
	}
	return false
}
