// Package app is the composition root shared by the four binaries: it builds configuration,
// connections and services once and starts the parts a target names. The all-in-one target
// (make run) runs everything in one process on an embedded NATS server and SQLite.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/bundle"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/erasure"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llmhealth"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Targets a process can run.
const (
	TargetAll        = "all"
	TargetAPI        = "api"
	TargetSummarizer = "summarizer"
	TargetEmergence  = "emergence"
	TargetScheduler  = "scheduler"
)

// Options are what a binary's main decides.
type Options struct {
	// Targets to run; TargetAll means every part.
	Targets []string
	Config  config.Config
	Log     *slog.Logger
	// Clock replaces time.Now (tests).
	Clock func() time.Time
	// TraceExporter, when set, receives the spans instead of the OTLP exporter (tests).
	TraceExporter sdktrace.SpanExporter
}

// App holds the process's shared parts.
type App struct {
	Opts     Options
	Cfg      config.Config
	Log      *slog.Logger
	DB       *gorm.DB
	Embedded *server.Server
	Dialer   bus.Dialer
	NC       *nats.Conn
	JS       jetstream.JetStream
	Registry *prometheus.Registry
	// Tokens counts tokens for every part of the process (the vocabularies are loaded once).
	Tokens *tokens.Counter
	// Guard recovers, logs and counts panics of the goroutines that serve outside input
	// (requests, MCP sessions, deliveries, change notifications).
	Guard     *panics.Guard
	Workspace *workspace.Service
	Messages  *conversation.Store
	Tools     *tool.Tools
	// Blame says where each line of a file came from (its history and the ledger's runs).
	Blame *blame.Service
	// Bundle exports and imports agents (API processes; nil on the others).
	Bundle *bundle.Service
	HTTP   *httpapi.Server
	// Erasure erases agents (API processes).
	Erasure *erasure.Service
	// Recall searches agents' memory (API processes with mate.memory.search.enabled).
	Recall *recall.Searcher
	// MCPHub tells the MCP servers of the process about workspace changes (see mcp.go).
	MCPHub *mcpserver.Hub
	// TracerProvider and Propagator trace HTTP requests, NATS messages and LLM calls
	// (see tracing.go); the provider is a no-op one unless spans are exported.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator

	// Addr is where the HTTP server listens, once started.
	Addr string
	// NATSCredentialsFile, when set, holds the generated credentials of the embedded NATS
	// listener (API keys set, no NATS credentials configured; see natscreds.go).
	NATSCredentialsFile string

	// llmHealth records the outcome of every LLM call of the process, for /readyz.
	llmHealth *llmhealth.Health
	// parts are services built for the API routes that the console uses too (console.go).
	parts apiParts
	// Console serves /console on API processes (nil on the others).
	Console http.Handler

	mu      sync.Mutex
	closers []func()
	wg      sync.WaitGroup
}

// Has reports whether the process runs target.
func (a *App) Has(target string) bool {
	for _, t := range a.Opts.Targets {
		if t == target || t == TargetAll {
			return true
		}
	}
	return false
}

// Now is the process clock.
func (a *App) Now() time.Time {
	if a.Opts.Clock != nil {
		return a.Opts.Clock()
	}
	return time.Now()
}

func (a *App) onClose(fn func()) {
	a.mu.Lock()
	a.closers = append(a.closers, fn)
	a.mu.Unlock()
}

// New opens the database (running migrations), the NATS connection (starting the embedded
// server when no URL is configured), and builds the services.
func New(ctx context.Context, o Options) (*App, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if len(o.Targets) == 0 {
		o.Targets = []string{TargetAll}
	}
	a := &App{Opts: o, Cfg: o.Config, Log: o.Log, Registry: prometheus.NewRegistry(), Tokens: tokens.NewCounter()}
	// Provisioning waits (with a log line per attempt) for a cluster that does not answer yet.
	ctx = bus.WithProvisionRetry(ctx, bus.ProvisionRetry{Log: o.Log})
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Guard = panics.New(o.Log, a.Registry)
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	if err := a.setupTracing(ctx); err != nil {
		return nil, err
	}
	if err := a.openDatabase(ctx); err != nil {
		return nil, err
	}
	if err := a.setupNATS(); err != nil {
		return nil, err
	}
	if err := a.connectNATS(); err != nil {
		return nil, err
	}
	a.newCore()
	if err := a.build(ctx); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// openDatabase opens the database and applies the migrations.
func (a *App) openDatabase(ctx context.Context) error {
	m := a.Cfg.Mate
	db, err := store.Open(m.Database.Driver, m.Database.DSN, m.DataDir, store.WithSQLiteSynchronous(m.Database.SQLiteSynchronous))
	if err != nil {
		return err
	}
	a.DB = db
	a.onClose(func() { _ = store.Close(db) })
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	// The pool's figures (go_sql_*: open, in use, idle, waits, connections closed for want of
	// idle room or by age): connection churn shows as the closed counters climbing.
	a.Registry.MustRegister(collectors.NewDBStatsCollector(sqlDB, m.Database.Driver))
	if err := store.Migrate(ctx, db); err != nil {
		return fmt.Errorf("migrate database: %w", err)
	}
	return nil
}

// setupNATS sets the dialer of the service's connections: to mate.nats.url, or to the
// embedded server it starts without one.
func (a *App) setupNATS() error {
	m := a.Cfg.Mate
	if m.NATS.URL != "" {
		a.Dialer = bus.Dialer{URL: m.NATS.URL, Auth: natsAuth(m.NATS)}
		return nil
	}
	// Two processes on one embedded store would corrupt it (nats-server does not lock
	// its store directory): hold an exclusive lock on the data dir while we run.
	unlock, err := lockDataDir(filepath.Join(m.DataDir, "nats"))
	if err != nil {
		return err
	}
	a.onClose(unlock)
	auth, generated, err := embeddedListenerAuth(m)
	if err != nil {
		return err
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{
		StoreDir: filepath.Join(m.DataDir, "nats"), Listen: m.NATS.EmbeddedListen, SyncAlways: m.NATS.SyncAlways,
		Auth: auth,
	})
	if err != nil {
		if m.NATS.EmbeddedListen != "" {
			return fmt.Errorf("mate.nats.embedded-listen (env MATE_NATS_EMBEDDED_LISTEN) %s: %w; choose a free port, or leave it empty to keep the embedded server in-process", m.NATS.EmbeddedListen, err)
		}
		return err
	}
	a.Embedded = ns
	a.onClose(func() { ns.Shutdown(); ns.WaitForShutdown() })
	// The service's own connections are in-process but authenticate all the same.
	a.Dialer = bus.Dialer{Server: ns, Auth: auth}
	if generated {
		file := filepath.Join(m.DataDir, NATSCredentialsFile)
		if err := writeNATSCredentials(file, ns.ClientURL(), auth.User, auth.Password); err != nil {
			return err
		}
		a.NATSCredentialsFile = file
		a.Log.Info("API keys are set, so the embedded NATS listener requires credentials: none configured, a generated password is in the file (mode 0600)",
			"listen", ns.ClientURL(), "user", auth.User, "file", file)
	}
	return nil
}

// connectNATS opens the core connection, checks the server's version and binds JetStream.
func (a *App) connectNATS() error {
	nc, err := a.Dialer.Connect("matememory-core")
	if err != nil {
		return err
	}
	a.NC = nc
	a.onClose(nc.Close)
	if err := bus.CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
		return fmt.Errorf("mate.nats.url %q: %w", a.Cfg.Mate.NATS.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	a.JS = js
	return nil
}

// newCore builds what every target shares: the workspace, the stored conversations, the
// tools and the HTTP server with its readiness checks.
func (a *App) newCore() {
	m := a.Cfg.Mate
	db, nc, js := a.DB, a.NC, a.JS
	a.Workspace = a.newWorkspace(db, append(a.recallHook(), a.mcpHook(), workspace.WithBudgetMetrics(a.Registry, a.Log))...)
	a.Messages = conversation.New(db)
	a.Blame = blame.New(a.Workspace, ledger.New(db, a.Now))
	a.Tools = tool.New(a.Workspace)
	a.Tools.EnableBlame(a.Blame)
	a.HTTP = httpapi.New(httpapi.NewAuthenticator(m.Auth.Keys), a.Registry, a.Log,
		httpapi.WithTracing(a.TracerProvider, a.Propagator), httpapi.WithCORS(m.HTTP.CORSOrigins), httpapi.WithGuard(a.Guard))
	a.HTTP.AddCheck("database", func(ctx context.Context) error {
		// A ping takes a fresh connection when the pooled ones are frozen: statements stuck
		// in flight are what shows a worker stuck on the database.
		if w := store.WatchOf(db); w != nil {
			if err := w.Stalled(store.StallReadiness); err != nil {
				return err
			}
		}
		return store.Ping(ctx, db)
	})
	a.HTTP.AddCheck("nats", func(ctx context.Context) error {
		if !nc.IsConnected() {
			return errors.New("nats: " + nc.Status().String())
		}
		_, err := js.AccountInfo(ctx)
		return err
	})
	a.llmHealth = llmhealth.New(a.Now)
	a.HTTP.AddInfo("llm", func() string {
		if !a.Cfg.LLMConfigured() {
			return "not configured (offline provider)"
		}
		return a.llmHealth.Status()
	})
}

func natsAuth(n config.NATS) bus.Auth {
	return bus.Auth{User: n.User, Password: n.Password, NKeySeedFile: n.NKeySeedFile, CredsFile: n.CredsFile,
		CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile, CAFile: n.TLS.CAFile}
}

// agentHooks are run when an agent is first seen (in the same transaction).
func (a *App) agentHooks() []workspace.Option {
	return []workspace.Option{a.consolidationHook()}
}

// budgets are the core files' default budgets, counted with the tokenizer of the agents'
// model (mate.llm.model; the estimate when its vocabulary is unknown).
func (a *App) budgets() workspace.Budgets {
	b := a.Cfg.Mate.Memory.Budget
	tk, err := a.Tokens.For(a.Cfg.Mate.LLM.Model)
	if err != nil {
		a.Log.Warn("exact tokenizer unavailable for the core files' budgets, estimating", "model", a.Cfg.Mate.LLM.Model, "err", err)
	}
	return workspace.Budgets{Memory: b.MemoryTokens, Profile: b.ProfileTokens, Tokenizer: tk}
}

// newWorkspace builds the workspace service as every process uses it (mcp-stdio too, which
// has no bus).
func (a *App) newWorkspace(db *gorm.DB, extra ...workspace.Option) *workspace.Service {
	m := a.Cfg.Mate
	opts := []workspace.Option{
		workspace.WithMaxBytes(m.Memory.MaxFileBytes),
		workspace.WithDefaults(m.Language, m.Timezone),
		workspace.WithBudgets(a.budgets()),
	}
	if a.Opts.Clock != nil {
		opts = append(opts, workspace.WithClock(a.Opts.Clock))
	}
	opts = append(opts, a.agentHooks()...)
	opts = append(opts, extra...)
	return workspace.New(db, opts...)
}

// build wires the routes and workers of the targets this process runs.
func (a *App) build(ctx context.Context) error {
	// Only a process running the API serves /api/v1 and MCP; the summarizer, emergence and
	// scheduler processes serve /healthz, /readyz and /metrics alone.
	if a.Has(TargetAPI) {
		rest.RegisterWorkspace(a.HTTP, a.Workspace)
		rest.RegisterBlame(a.HTTP, a.Blame)
		rest.RegisterMessages(a.HTTP, a.Messages, a.Workspace)
		rest.RegisterTools(a.HTTP, a.Tools)
		a.Bundle = a.newBundle()
		rest.RegisterBundle(a.HTTP, a.Bundle, a.Log)
		mcpserver.Register(a.HTTP, a.Tools, a.mcpOptions())
		if err := a.subscribeMCPChanges(); err != nil {
			return err
		}
	}
	if err := a.buildErasure(ctx); err != nil {
		return err
	}
	if err := a.buildRecall(ctx); err != nil {
		return err
	}
	if err := a.buildWindow(ctx); err != nil {
		return err
	}
	if err := a.buildPipeline(ctx); err != nil {
		return err
	}
	if err := a.buildEmergence(ctx); err != nil {
		return err
	}
	if err := a.buildConsole(); err != nil {
		return err
	}
	return a.listenErasures(ctx)
}

// Start begins serving HTTP (for the api target; other targets serve /metrics, /healthz and
// /readyz on the same address) and starts the workers.
func (a *App) Start(ctx context.Context) error {
	addr := a.Cfg.Mate.HTTP.Addr
	ln, err := a.HTTP.Listen(addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return fmt.Errorf("mate.http.addr (env MATE_HTTP_ADDR) %s: %w; choose a free port", addr, err)
		}
		return err
	}
	a.Addr = ln.Addr().String()
	h := a.Cfg.Mate.HTTP
	ln = netutil.LimitListener(ln, h.MaxConnections)
	srv := &http.Server{Handler: a.Guard.HTTP(a.Handler()), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:  config.Seconds(h.ReadTimeoutSeconds),
		WriteTimeout: config.Seconds(h.WriteTimeoutSeconds),
		IdleTimeout:  config.Seconds(h.IdleTimeoutSeconds)}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("http server stopped", "err", err)
		}
	}()
	a.onClose(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return nil
}

// Close stops everything in reverse order of start.
func (a *App) Close() {
	a.mu.Lock()
	closers := a.closers
	a.closers = nil
	a.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	a.wg.Wait()
}

// Banner describes where the process listens, for the start-up log.
func (a *App) Banner() string {
	var b strings.Builder
	fmt.Fprintf(&b, "MateMemory (%s) listening on http://%s\n", strings.Join(a.Opts.Targets, ","), a.Addr)
	fmt.Fprintf(&b, "  version: %s\n", version())
	if a.Console != nil {
		fmt.Fprintf(&b, "  console: http://%s/console/\n", a.Addr)
	}
	fmt.Fprintf(&b, "  database: %s", a.Cfg.Mate.Database.Driver)
	if a.Cfg.Mate.Database.Driver == "sqlite" {
		where := a.Cfg.Mate.Database.DSN // a file name, no secret in it
		if where == "" {
			where = filepath.Join(a.Cfg.Mate.DataDir, "matememory.db")
		}
		fmt.Fprintf(&b, " (%s)", where)
	}
	b.WriteString("\n")
	if a.Embedded != nil {
		where := "in-process only"
		if a.Cfg.Mate.NATS.EmbeddedListen != "" {
			where = a.Embedded.ClientURL()
			switch {
			case a.NATSCredentialsFile != "":
				where += ", credentials in " + a.NATSCredentialsFile
			case !natsAuth(a.Cfg.Mate.NATS).Required() && a.Cfg.Mate.NATS.TLS.CAFile == "":
				where += ", open to local clients (no API keys)"
			}
		}
		fmt.Fprintf(&b, "  nats: embedded JetStream (%s), store %s\n", where, filepath.Join(a.Cfg.Mate.DataDir, "nats"))
	} else {
		fmt.Fprintf(&b, "  nats: %s\n", a.Cfg.Mate.NATS.URL)
	}
	if a.Cfg.LLMConfigured() {
		fmt.Fprintf(&b, "  llm: %s model %s\n", a.Cfg.Mate.LLM.BaseURL, a.Cfg.Mate.LLM.Model)
	} else {
		b.WriteString("  llm: none configured: offline provider (extractive daily digest only); set OPENAI_BASE_URL and OPENAI_API_KEY\n")
	}
	if host, _, _ := net.SplitHostPort(a.Addr); host != "" {
		fmt.Fprintf(&b, "  try: curl http://%s/api/v1/agents/1/system-prompt\n", a.Addr)
	}
	return b.String()
}
