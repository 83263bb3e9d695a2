// Package window assembles the context window a chat service sends to its model before each
// call (the spec's ConversationWindowManager): the system prompt with the agent's workspace
// files, a summary of the early conversation, the recent history verbatim and the current
// user message last, counted with the model's tokenizer and compacted to fit.
//
// Compaction summarizes the messages before the last preserve-recent-pairs exchanges with
// the LLM. Summaries are cached in a NATS KV bucket shared by every API replica, keyed by
// the content they summarize, extended incrementally as the conversation grows, and
// computed once however many replicas ask at the same time. When the LLM cannot summarize,
// the result says so (degraded) and carries an extractive summary instead. Messages pushed
// out of the window that long-term memory has not extracted yet are flushed to the
// summarizer first. A tool call is never separated from its results, the current message
// is always last, and messages are never merged or reordered.
package window

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/ratelog"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// History reads a conversation's stored messages (pkg/internal/conversation.Store).
type History interface {
	List(ctx context.Context, agentID int64, conversationID string, afterID int64, limit int) ([]conversation.Message, error)
}

// Workspace gives the agent's settings and its system-prompt injection (pkg/internal/workspace.Service).
type Workspace interface {
	EnsureAgent(ctx context.Context, agentID int64) (store.Agent, error)
	SystemPrompt(ctx context.Context, agentID int64) (string, error)
}

// Deps are the collaborators of a Service. LLM may be nil (no endpoint configured: every
// compaction degrades to an extractive summary, visibly).
type Deps struct {
	JS         jetstream.JetStream
	History    History
	Workspace  Workspace
	Watermarks Watermarks
	LLM        llm.Client
	Prompts    *prompt.Loader
	Counter    *tokens.Counter
	Log        *slog.Logger
}

// Service assembles context windows.
type Service struct {
	cfg     config.Window
	js      jetstream.JetStream
	history History
	ws      Workspace
	marks   Watermarks
	llm     llm.Client
	prompts *prompt.Loader
	counter *tokens.Counter
	log     *slog.Logger
	// warnLog logs failed summary calls (the LLM down) at a bounded rate.
	warnLog     *ratelog.Logger
	cache       *kvCache
	counts      *countCache
	prefixes    *prefixMemo
	recheck     time.Duration
	chunkTokens int
	now         func() time.Time
	stats       stats
	metrics     metrics
	tracing     tracing.Messaging
	recall      Recaller

	// options before New resolves them
	bucket   string
	replicas int
	owner    string
	lockTTL  time.Duration
	failTTL  time.Duration
	wait     time.Duration
	reg      prometheus.Registerer
}

// Option configures a Service.
type Option func(*Service)

// WithReplicas sets the replication factor of the summary bucket (default 1).
func WithReplicas(n int) Option { return func(s *Service) { s.replicas = n } }

// WithOwner names this replica in in-flight markers (default host-pid-random).
func WithOwner(name string) Option { return func(s *Service) { s.owner = name } }

// WithLockTTL bounds how long a replica may hold the in-flight marker of one summary before
// others take over (default 2 minutes; it is renewed after each chunk). Set it above the
// LLM timeout.
func WithLockTTL(d time.Duration) Option { return func(s *Service) { s.lockTTL = d } }

// WithFailureTTL is how long a failed summary makes other requests degrade at once instead
// of calling the LLM again (default 30 s).
func WithFailureTTL(d time.Duration) Option { return func(s *Service) { s.failTTL = d } }

// WithChunkTokens caps the conversation tokens sent to the summarizer in one call (default
// 12000); longer stretches are summarized in several incremental calls.
func WithChunkTokens(n int) Option { return func(s *Service) { s.chunkTokens = n } }

// WithPrefixRecheck is how long a stored prefix found exact (its rows counted against the
// cached summary, or read in full) is trusted without counting it again (default
// DefaultPrefixRecheck; 0 counts on every request, as before the memo).
func WithPrefixRecheck(d time.Duration) Option { return func(s *Service) { s.recheck = d } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithTracing starts a producer span with m for each flush request the window publishes to
// the summarizer (the request's trace context travels in the message headers either way).
func WithTracing(m tracing.Messaging) Option { return func(s *Service) { s.tracing = m } }

// WithRegisterer registers the service's Prometheus metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(s *Service) { s.reg = r } }

// New builds the service and creates (or updates) the summary bucket. A
// summary-cache-minutes of 0 disables the shared cache and its single-flight: every
// compaction then calls the LLM.
func New(ctx context.Context, cfg config.Window, d Deps, opts ...Option) (*Service, error) {
	s := &Service{
		cfg: cfg, js: d.JS, history: d.History, ws: d.Workspace, marks: d.Watermarks, llm: d.LLM,
		prompts: d.Prompts, counter: d.Counter, log: d.Log,
		counts: newCountCache(200_000), prefixes: newPrefixMemo(100_000), recheck: DefaultPrefixRecheck,
		chunkTokens: 12000, now: time.Now,
		bucket: Bucket, replicas: 1, lockTTL: 2 * time.Minute, failTTL: 30 * time.Second,
	}
	for _, o := range opts {
		o(s)
	}
	if s.prompts == nil {
		s.prompts = prompt.NewLoader("")
	}
	if s.counter == nil {
		s.counter = tokens.NewCounter()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.warnLog = ratelog.New(s.log, 30*time.Second, 5)
	if s.owner == "" {
		host, _ := os.Hostname()
		var r [4]byte
		_, _ = rand.Read(r[:])
		s.owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r[:]))
	}
	// A request waits for another replica's summary as long as that replica may hold its
	// marker.
	s.wait = s.lockTTL
	if d.History == nil || d.Workspace == nil {
		return nil, fmt.Errorf("window: History and Workspace are required")
	}
	s.metrics = newMetrics(s.reg)
	if ttl := cfg.SummaryCacheMinutes.Duration(); ttl > 0 {
		if d.JS == nil {
			return nil, fmt.Errorf("window: a JetStream context is required for the summary cache (or set summary-cache-minutes to 0)")
		}
		kv, err := openCache(ctx, d.JS, s.bucket, ttl, s.replicas)
		if err != nil {
			return nil, err
		}
		s.cache = &kvCache{kv: kv, ttl: ttl, owner: s.owner, lockTTL: s.lockTTL, failTTL: s.failTTL, wait: s.wait, now: s.now,
			waiting: s.metrics.waiting}
	}
	return s, nil
}

// Request asks for a context window.
type Request struct {
	AgentID        int64
	ConversationID string
	// SystemPrompt is the caller's own system prompt; the agent's workspace files are
	// appended to it.
	SystemPrompt string
	// UserMessage is the current user message; it is always last.
	UserMessage string
	// Model picks the tokenizer; empty or unknown models are estimated.
	Model string
	// MaxInputTokens is the budget (0 = default-max-input-tokens).
	MaxInputTokens int
	// Inline says the history is Messages (possibly empty) rather than mate_message.
	Inline   bool
	Messages []Message
	// Recall, when set, adds memory search results to the system message.
	Recall *RecallRequest
	// Preview builds the window without side effects, for a person looking at it (the
	// console): the model is never called, nothing is stored in the summary cache or
	// published for the summarizer, and metrics are left alone. A summary found in the
	// cache is used; one that a real request would ask the model for is stood in for by
	// the extractive summary, and a warning says so.
	Preview bool
}

// maxInputTokensLimit bounds maxInputTokens (no model accepts more).
const maxInputTokensLimit = 100_000_000

func (r Request) validate() error {
	if r.AgentID <= 0 {
		return invalidf("agentId must be a positive number, got %d", r.AgentID)
	}
	if err := conversation.ValidateConversationID(r.ConversationID); err != nil {
		return invalidf("%s", err.Error())
	}
	if strings.TrimSpace(r.UserMessage) == "" {
		return invalidf("userMessage is empty: the current user message is required (it is placed last)")
	}
	if !utf8.ValidString(r.UserMessage) || !utf8.ValidString(r.SystemPrompt) {
		return invalidf("systemPrompt and userMessage must be valid UTF-8")
	}
	if r.MaxInputTokens < 0 || r.MaxInputTokens > maxInputTokensLimit {
		return invalidf("maxInputTokens must be between 1 and %d (or omitted for the default), got %d", maxInputTokensLimit, r.MaxInputTokens)
	}
	if len(r.Model) > 200 {
		return invalidf("model name is %d bytes; at most 200", len(r.Model))
	}
	if err := r.Recall.validate(); err != nil {
		return err
	}
	if r.Inline {
		return validateHistory(r.Messages)
	}
	return nil
}

// Tokens is the token account of a result.
type Tokens = api.ContextTokens

// Result is an assembled context window and an account of how it was made.
type Result = api.ContextResult

// assembly is the working state of one request.
type assembly struct {
	req    Request
	lang   string
	tk     tokens.Tokenizer
	hist   []item
	lay    layout
	ck     string
	chain  [][32]byte
	exSet  map[int]bool
	res    *Result
	counts *countCache
	sysTok int
	curTok int
	// When the history was resumed from a cached summary (stored history only), offset
	// messages before hist are not loaded: pre summarizes them, preChain is their chained
	// hash and offsetTokens what they cost.
	offset       int
	pre          *summaryEntry
	preChain     [32]byte
	offsetTokens int
	// exactAt is when the stored history read is known to have been exactly the stored
	// conversation (zero for inline history), and firstID its first row's id then: the
	// summaries computed from it are recorded as exact as of then (prefixMemo).
	exactAt time.Time
	firstID int64
}

// Assemble builds the context window for req, compacting as the spec describes.
func (s *Service) Assemble(ctx context.Context, req Request) (*Result, error) {
	return s.assemble(ctx, req, false)
}

// Retry is the emergency compaction for a context-length error from the model: the last 2
// exchanges only, no LLM call.
func (s *Service) Retry(ctx context.Context, req Request) (*Result, error) {
	return s.assemble(ctx, req, true)
}

// assemble reads in the order of the window: the request's agent and tokenizer, the system
// message (cut or with recall when asked), the history (resumed from a cached summary, or
// read), the compaction, the trim to fit, the answer.
func (s *Service) assemble(ctx context.Context, req Request, emergency bool) (*Result, error) {
	a, injection, err := s.begin(ctx, req, emergency)
	if err != nil {
		return nil, err
	}
	sys, base, err := s.systemMessage(ctx, a, injection)
	if err != nil {
		return nil, err
	}
	t := &a.res.Tokens
	histTok, err := s.readHistory(ctx, a, base, t.Trigger, emergency)
	if err != nil {
		return nil, err
	}
	t.Before = base + histTok
	keepFrom := 0
	var sum *summaryEntry
	switch {
	case emergency:
		keepFrom = a.lay.exchangeStartItem(2)
	case base+histTok > t.Trigger:
		keepFrom, sum = s.compact(ctx, a, base, t.Trigger)
	}
	if a.offset > 0 && sum == nil {
		return nil, fmt.Errorf("context of %s: resumed from a summary that was then not used", req.ConversationID) // cannot happen: compact returns the floor
	}
	f := s.fit(a, base, t.Budget, keepFrom, sum)
	r := a.answer(sys, base, f)
	if r.Degraded {
		s.stats.degraded.Add(1)
	}
	s.flush(ctx, a, f.keepFrom)
	if !req.Preview {
		s.metrics.observe(r)
	}
	return r, nil
}

// begin counts the request, checks it and sets up its assembly: the agent's language, the
// tokenizer of the model, the conversation's key. injection is the agent's workspace part
// of the system prompt.
func (s *Service) begin(ctx context.Context, req Request, emergency bool) (a *assembly, injection string, err error) {
	kind := "assemble"
	if emergency {
		kind = "retry"
	}
	s.metrics.requests.WithLabelValues(kind).Inc()
	if err := req.validate(); err != nil {
		return nil, "", err
	}
	agent, err := s.ws.EnsureAgent(ctx, req.AgentID)
	if err != nil {
		return nil, "", err
	}
	injection, err = s.ws.SystemPrompt(ctx, req.AgentID)
	if err != nil {
		return nil, "", err
	}
	a = &assembly{req: req, lang: "zh", res: &Result{Model: req.Model, Emergency: emergency}, counts: s.counts}
	if agent.Language == "en" {
		a.lang = "en"
	}
	a.res.Language = a.lang
	a.tk, err = s.counter.For(req.Model)
	if err != nil {
		a.warn("exact tokenizer unavailable, estimating: %v", err)
	}
	a.res.Tokenizer, a.res.Exact = a.tk.Name(), a.tk.Exact()
	a.ck = conversationKey(req.AgentID, req.ConversationID, a.lang)
	return a, injection, nil
}

// systemMessage builds the system message (the workspace cut when it cannot fit, the recall
// block when asked), counts it and the current message, and sets the budget's fixed part.
// base is what the history cannot have: system, current message and reply priming; a
// request whose base is over the budget is refused.
func (s *Service) systemMessage(ctx context.Context, a *assembly, injection string) (sys Message, base int, err error) {
	req := a.req
	system := func(injection string) Message {
		text := joinSystem(req.SystemPrompt, injection)
		if s.recall != nil {
			text = joinSystem(text, searchGuidance(a.lang))
		}
		return Message{Role: RoleSystem, Content: text}
	}
	sys = system(injection)
	if sys.Content != "" {
		a.sysTok = s.counts.message(a.tk, sys)
	}
	a.curTok = s.counts.message(a.tk, Message{Role: RoleUser, Content: req.UserMessage})
	budget := req.MaxInputTokens
	if budget == 0 {
		budget = s.cfg.DefaultMaxInputTokens
	}
	if a.sysTok+a.curTok+tokens.ReplyPriming > budget && strings.TrimSpace(injection) != "" {
		injection, sys = s.cutWorkspace(a, injection, budget, system)
	}
	recallTok := 0
	if req.Recall != nil {
		// The block may take what the budget leaves after the system message, the current
		// message and priming; it is counted in the system message like the rest.
		room := budget - a.sysTok - a.curTok - tokens.ReplyPriming - 4
		block, info, err := s.recallBlock(ctx, a.tk, a.lang, req, room)
		if err != nil {
			return Message{}, 0, err
		}
		a.res.Recall = info
		if block != "" {
			sys.Content = joinSystem(sys.Content, block)
			before := a.sysTok
			a.sysTok = s.counts.message(a.tk, sys)
			recallTok = a.sysTok - before
			info.Tokens = recallTok
		}
	}
	t := &a.res.Tokens
	t.Budget, t.System, t.Current, t.Priming, t.Recall = budget, a.sysTok, a.curTok, tokens.ReplyPriming, recallTok
	t.Workspace = s.counts.text(a.tk, injection)
	t.Trigger = int(float64(budget) * s.cfg.CompactTriggerRatio)
	base = a.sysTok + a.curTok + tokens.ReplyPriming
	if base > budget {
		return Message{}, 0, &TooLargeError{System: a.sysTok, Workspace: t.Workspace, Current: a.curTok, Priming: tokens.ReplyPriming, Budget: budget}
	}
	return sys, base, nil
}

// readHistory resumes the conversation from a cached summary where it can (never in an
// emergency), else reads and counts it; histTok is what it costs whole.
func (s *Service) readHistory(ctx context.Context, a *assembly, base, trigger int, emergency bool) (histTok int, err error) {
	resumed := false
	if !emergency {
		resumed = s.resume(ctx, a, base, trigger)
	}
	if !resumed {
		if err := s.loadHistory(ctx, a); err != nil {
			return 0, err
		}
		a.countHistory(s.counts)
	}
	return a.offsetTokens + a.tokensOf(0, len(a.hist)), nil
}

// fitted is what the trim keeps: the history from keepFrom (kept tokens) and the summary,
// if it still fits.
type fitted struct {
	keepFrom, kept int
	sum            *summaryEntry
	sumMsg         Message
	sumTok         int
}

// fit trims to the budget: whole units from the front, down to the last exchange; then the
// summary; then, only if the last exchange alone is too big, units of it too (fitting wins:
// a request over the model's limit fails outright).
func (s *Service) fit(a *assembly, base, budget, keepFrom int, sum *summaryEntry) fitted {
	f := fitted{keepFrom: keepFrom, sum: sum}
	if sum != nil {
		f.sumMsg = Message{Role: RoleUser, Content: summaryContent(a.lang, *sum)}
		f.sumTok = s.counts.message(a.tk, f.sumMsg)
	}
	f.kept = a.tokensOf(f.keepFrom, len(a.hist))
	lastEx := a.lay.exchangeStartItem(1)
	u := a.lay.unitStartingAt(f.keepFrom)
	for base+f.sumTok+f.kept > budget && f.keepFrom < lastEx {
		f.kept -= a.tokensOf(f.keepFrom, a.lay.units[u].end)
		f.keepFrom = a.lay.units[u].end
		u++
	}
	if f.sum != nil && base+f.sumTok+f.kept > budget {
		a.warn("the summary of the first %d messages was dropped: with the last exchange it exceeds the budget", f.sum.Covers)
		f.sum, f.sumTok = nil, 0
	}
	if base+f.kept > budget && f.keepFrom < len(a.hist) {
		// Keep the last exchange: shorten its largest messages (marked as truncated) rather
		// than drop them; drop whole units only if even that does not fit.
		var cut int
		f.kept, cut = a.truncateToFit(f.keepFrom, budget-base)
		a.warn("the last exchange alone exceeds the budget: %d of its messages were truncated (marked %q) to fit", cut, strings.TrimSpace(truncatedMarker(a.lang)))
	}
	if base+f.kept > budget && f.keepFrom < len(a.hist) {
		a.warn("the last exchange exceeds the budget even truncated: its earliest messages were dropped to fit")
		for base+f.kept > budget && f.keepFrom < len(a.hist) {
			f.kept -= a.tokensOf(f.keepFrom, a.lay.units[u].end)
			f.keepFrom = a.lay.units[u].end
			u++
		}
	}
	return f
}

// answer fills the result: the messages (system, summary, kept history, current) and the
// counts of what was kept, trimmed and summarized.
func (a *assembly) answer(sys Message, base int, f fitted) *Result {
	r := a.res
	if sys.Content != "" {
		r.Messages = append(r.Messages, sys)
	}
	if f.sum != nil {
		r.Messages = append(r.Messages, f.sumMsg)
		r.Summarized = f.sum.Covers
		if r.SummaryKind == "" {
			r.SummaryKind = "llm"
		}
	} else {
		r.SummaryKind = ""
	}
	for _, it := range a.hist[f.keepFrom:] {
		r.Messages = append(r.Messages, it.Message)
	}
	r.Messages = append(r.Messages, Message{Role: RoleUser, Content: a.req.UserMessage})
	r.HistoryMessages = a.offset + len(a.hist)
	r.HistoryRead = len(a.hist)
	r.Kept = len(a.hist) - f.keepFrom
	r.Trimmed = a.offset + f.keepFrom - r.Summarized
	r.Compacted = a.offset+f.keepFrom > 0
	r.Tokens.Summary, r.Tokens.History = f.sumTok, f.kept
	r.Tokens.Total = base + f.sumTok + f.kept
	return r
}

func (s *Service) loadHistory(ctx context.Context, a *assembly) error {
	if a.req.Inline {
		a.res.HistorySource = "inline"
		a.hist = make([]item, len(a.req.Messages))
		for i, m := range a.req.Messages {
			a.hist[i] = item{Message: m}
		}
	} else {
		a.res.HistorySource = "store"
		readAt := s.now()
		rows, err := s.history.List(ctx, a.req.AgentID, a.req.ConversationID, 0, 0)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			a.exactAt, a.firstID = readAt, rows[0].ID
		}
		a.hist = make([]item, 0, len(rows))
		for _, row := range rows {
			m, err := fromStored(row)
			if err != nil {
				// One unusable row (stored before validation was this strict) must not
				// make the conversation's context unavailable for good: leave it out, say so.
				a.res.SkippedMessages++
				a.res.Warnings = append(a.res.Warnings, "left out: "+err.Error())
				continue
			}
			a.hist = append(a.hist, item{Message: m, id: row.ID})
		}
	}
	a.hist = a.dedupeCurrent(a.hist)
	return nil
}

// dedupeCurrent: a chat service often stores the user's message before asking for the
// context; the current message is then the last history message, and is used once, last.
func (a *assembly) dedupeCurrent(h []item) []item {
	if n := len(h); n > 0 {
		last := h[n-1]
		if last.Role == RoleUser && last.Name == "" && last.Content == a.req.UserMessage {
			a.res.CurrentFromHistory = true
			return h[:n-1]
		}
	}
	return h
}

// compact summarizes the history before the last preserve-recent-pairs exchanges (or
// reuses a cached summary) and returns where the verbatim history starts. Positions are
// indexes into a.hist; cache entries count messages from the start of the conversation.
func (s *Service) compact(ctx context.Context, a *assembly, base, trigger int) (int, *summaryEntry) {
	boundary := a.lay.exchangeStartItem(s.cfg.PreserveRecentPairs)
	a.buildChain(boundary)
	var prev summaryEntry
	prevN, found := 0, false
	if boundary > 0 && s.cache != nil {
		e, n, ok, err := s.cache.best(ctx, a.ck, a.offset+boundary, a.usableHashAbs)
		switch {
		case err != nil:
			a.warn("summary cache unavailable, summarizing without it: %v", err)
		case ok:
			prev, prevN, found = e, n-a.offset, true
		}
	}
	if !found && a.pre != nil {
		prev, prevN, found = *a.pre, 0, true
	}
	if found {
		cost := base + a.summaryTokens(prev) + a.tokensOf(prevN, len(a.hist))
		if prevN >= boundary || cost <= trigger {
			// The cached summary, with what came after it verbatim, is enough.
			a.res.CacheHit = true
			s.stats.cacheHits.Add(1)
			if !a.req.Preview {
				s.cache.touch(ctx, a.ck, a.chainHex(prevN), prev)
			}
			return prevN, &prev
		}
	}
	if boundary == 0 {
		return 0, nil // nothing older than the preserved exchanges: trimming decides
	}
	e, err := s.summarize(ctx, a, prev, prevN, boundary)
	if err == nil {
		return boundary, &e
	}
	if errors.Is(err, errPreviewUncached) {
		a.warn("preview: no summary of the first %d messages is cached; a real request would ask the model for one, the preview shows an extractive summary in its place", a.offset+boundary)
		e := s.extractive(a, prev, prevN, boundary)
		return boundary, &e
	}
	// Degrade visibly: an extractive summary stands for the messages instead.
	s.warnLog.Warn("context summary failed; an extractive summary was used", "agent", a.req.AgentID,
		"conversation", a.req.ConversationID, "cause", err.Error())
	a.res.Degraded = true
	a.res.DegradedReason = "LLM summary unavailable, used an extractive summary: " + err.Error()
	e = s.extractive(a, prev, prevN, boundary)
	return boundary, &e
}

// extractive stands an extractive summary in for hist[prevN:boundary] folded into prev.
func (s *Service) extractive(a *assembly, prev summaryEntry, prevN, boundary int) summaryEntry {
	a.res.SummaryKind = "extractive"
	text := extract(a.lang, a.tk, s.cfg.SummaryMaxTokens, prev.Text, a.hist[prevN:boundary])
	return summaryEntry{Text: text, Covers: a.offset + boundary, Language: a.lang,
		Goal: a.goalOf(prev, prevN, a.hist[prevN:boundary])}
}

// summarize folds hist[from:to] into prev, through the shared single-flight when the cache
// is on.
func (s *Service) summarize(ctx context.Context, a *assembly, prev summaryEntry, from, to int) (summaryEntry, error) {
	if a.req.Preview {
		if s.cache != nil {
			if e, ok, err := s.cache.get(ctx, a.ck, a.chainHex(to)); err == nil && ok {
				a.res.CacheHit = true
				return e, nil
			}
		}
		return summaryEntry{}, errPreviewUncached
	}
	if s.llm == nil {
		return summaryEntry{}, errNoLLM
	}
	compute := func(ctx context.Context, renew func(context.Context) error) (summaryEntry, error) {
		return s.computeSummary(ctx, a, prev, from, to, renew)
	}
	if s.cache == nil {
		return compute(ctx, func(context.Context) error { return nil })
	}
	s.stats.flights.Add(1)
	e, computed, err := s.cache.singleFlight(ctx, a.ck, a.chainHex(to), compute)
	switch {
	case err == nil && !computed:
		a.res.CacheHit = true
		s.stats.sharedHits.Add(1)
		return e, nil
	case err == nil:
		return e, nil
	case ctx.Err() != nil:
		return e, ctx.Err()
	}
	if _, ok := err.(*computeError); ok || err == errWaitTimeout {
		return e, err
	}
	if _, ok := err.(*sharedFailure); ok {
		return e, err
	}
	// The cache itself failed (NATS unavailable): summarize here, uncoordinated.
	a.warn("summary cache unavailable, summarizing without coordination: %v", err)
	return compute(ctx, func(context.Context) error { return nil })
}

func (a *assembly) warn(format string, args ...any) {
	a.res.Warnings = append(a.res.Warnings, fmt.Sprintf(format, args...))
}

// countHistory hashes and counts the loaded history.
func (a *assembly) countHistory(c *countCache) {
	for i := range a.hist {
		a.hist[i].hash = contentHash(a.hist[i].Message)
		a.hist[i].tokens = c.count(a.tk, a.hist[i].hash, a.hist[i].Message)
	}
	a.lay = buildLayout(a.hist)
}

func (a *assembly) tokensOf(from, to int) int {
	n := 0
	for _, it := range a.hist[from:to] {
		n += it.tokens
	}
	return n
}

func (a *assembly) summaryTokens(e summaryEntry) int {
	return a.counts.message(a.tk, Message{Role: RoleUser, Content: summaryContent(a.lang, e)})
}

// buildChain computes the chained content hash of every prefix up to hist[:n].
func (a *assembly) buildChain(n int) {
	a.chain = make([][32]byte, n+1)
	a.chain[0] = sha256.Sum256([]byte(a.ck))
	if a.pre != nil {
		a.chain[0] = a.preChain
	}
	var buf [64]byte
	for i := 0; i < n; i++ {
		copy(buf[:32], a.chain[i][:])
		copy(buf[32:], a.hist[i].hash[:])
		a.chain[i+1] = sha256.Sum256(buf[:])
	}
}

func (a *assembly) chainHex(n int) string { return hex.EncodeToString(a.chain[n][:16]) }

// usableHashAbs is the hash of the conversation's first n messages, or "" when a summary of
// them cannot be used here (outside the loaded history, or ending inside a tool call's unit).
func (a *assembly) usableHashAbs(n int) string {
	n -= a.offset
	if n <= 0 || n >= len(a.chain) || a.lay.unitStartingAt(n) < 0 {
		return ""
	}
	return a.chainHex(n)
}

// chunkEnd picks the end of the next summarizer chunk starting at from (a unit start):
// whole units under the token budget (at least one), cut back to an exchange start when
// one lies inside the chunk.
func (a *assembly) chunkEnd(from, to, budget int) int {
	u := a.lay.unitStartingAt(from)
	end, used, lastEx := from, 0, 0
	for ; u < len(a.lay.units) && a.lay.units[u].end <= to; u++ {
		un := a.lay.units[u]
		cost := a.tokensOf(un.start, un.end)
		if end > from && used+cost > budget {
			break
		}
		used += cost
		end = un.end
		if a.isExchangeStart(end) {
			lastEx = end
		}
	}
	if end < to && lastEx > from {
		return lastEx
	}
	if end == from { // a unit straddles to (cannot happen: to is an exchange start)
		return to
	}
	return end
}

func (a *assembly) isExchangeStart(i int) bool {
	if a.exSet == nil {
		a.exSet = make(map[int]bool, len(a.lay.exStart))
		for _, u := range a.lay.exStart {
			a.exSet[a.lay.units[u].start] = true
		}
	}
	return a.exSet[i]
}

func joinSystem(prompt, injection string) string {
	prompt, injection = strings.TrimRight(prompt, "\n"), strings.TrimSpace(injection)
	switch {
	case prompt == "":
		return injection
	case injection == "":
		return prompt
	}
	return prompt + "\n\n" + injection
}

// conversationKey names a conversation (in an agent's language) in the cache.
func conversationKey(agentID int64, conversationID, lang string) string {
	sum := sha256.Sum256([]byte("v1\x00" + strconv.FormatInt(agentID, 10) + "\x00" + conversationID + "\x00" + lang))
	return hex.EncodeToString(sum[:12])
}

// Stats are counters for tests and diagnostics.
type Stats struct {
	LLMCalls, CacheHits, SharedHits, Flights, Degraded, Flushes int64
	// PrefixesTrusted and PrefixesCounted: resumed requests whose stored prefix was taken
	// as exact from the memo, and those that counted it.
	PrefixesTrusted, PrefixesCounted int64
}

type stats struct {
	llmCalls, cacheHits, sharedHits, flights, degraded, flushes atomic.Int64
	prefixTrusted, prefixCounted                                atomic.Int64
}

// Stats returns the service's counters since start.
func (s *Service) Stats() Stats {
	return Stats{LLMCalls: s.stats.llmCalls.Load(), CacheHits: s.stats.cacheHits.Load(),
		SharedHits: s.stats.sharedHits.Load(), Flights: s.stats.flights.Load(),
		Degraded: s.stats.degraded.Load(), Flushes: s.stats.flushes.Load(),
		PrefixesTrusted: s.stats.prefixTrusted.Load(), PrefixesCounted: s.stats.prefixCounted.Load()}
}

// Forget drops what this process remembers of the agent's conversations (which stored
// prefixes its summaries describe exactly): its erasure. The summaries themselves are in the
// shared bucket, which the erasure empties of the agent's keys.
func (s *Service) Forget(agentID int64) { s.prefixes.forgetAgent(agentID) }
