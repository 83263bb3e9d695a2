package summarizer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/matememory/matememory/pkg/internal/guard"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/store"
)

type extractInput struct {
	Language, Date         string
	Profile, Memory, Daily string
	Messages               []store.Message
	Conversations          int
}

type extractOutput struct {
	Extraction
	Provider, Model     string
	TokensIn, TokensOut int
	Latency             time.Duration
	// Truncated: the model stopped at its output limit.
	Truncated bool
}

// provider turns a transcript into an Extraction.
type provider interface {
	extract(ctx context.Context, in extractInput) (extractOutput, error)
}

func (s *Service) provider() provider {
	if s.d.LLM == nil {
		return offlineProvider{m: s.d.Metrics}
	}
	return &llmProvider{c: s.d.LLM, prompts: s.d.Prompts, json: s.set.JSONMode,
		maxTokens: s.set.Memory.SummaryMaxTokens, m: s.d.Metrics, redact: s.set.Memory.RedactLLMInput}
}

// llmProvider asks an OpenAI-compatible model with the memory/summarize templates.
type llmProvider struct {
	c         llm.Client
	prompts   *prompt.Loader
	json      bool
	maxTokens int
	m         *Metrics
	// redact masks secrets in the transcript before it leaves for the model
	// (mate.memory.redact-llm-input).
	redact bool
}

// dailyTailRunes bounds how much of today's daily note the extraction prompt carries. The
// model needs the note only to avoid repeating what was already recorded today, and what it
// is likely to repeat is the latest entries; the whole note grows through the day and was
// the part of the prompt that grew with it (issue 14).
const dailyTailRunes = 800

// dailyTail returns the end of a daily note, at most max runes, cut at a line start, with a
// line saying how many earlier lines were left out (in the agent's language).
func dailyTail(language, daily string, max int) string {
	if utf8.RuneCountInString(daily) <= max {
		return daily
	}
	cut := len(daily)
	for n := 0; n < max && cut > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(daily[:cut])
		cut -= size
	}
	if i := strings.IndexByte(daily[cut:], '\n'); i >= 0 && cut+i+1 < len(daily) {
		cut += i + 1 // start at a whole line
	}
	omitted := strings.Count(daily[:cut], "\n")
	note := fmt.Sprintf("…（前面 %d 行从略）\n", omitted)
	if language == "en" {
		note = fmt.Sprintf("… (%d earlier lines left out)\n", omitted)
	}
	return note + daily[cut:]
}

// maxOutputTokens caps the output budget asked of the model.
const maxOutputTokens = 16384

func (p *llmProvider) extract(ctx context.Context, in extractInput) (extractOutput, error) {
	out := extractOutput{Provider: ProviderLLM, Model: p.c.Model()}
	sys, err := p.prompts.Render(prompt.SummarizeSystem, in.Language, map[string]string{"date": in.Date})
	if err != nil {
		return out, &stepError{transient: false, err: err}
	}
	transcript := Transcript(in.Language, in.Messages)
	if p.redact {
		transcript = guard.Redact(transcript)
	}
	user, err := p.prompts.Render(prompt.SummarizeUser, in.Language, map[string]string{
		"date": in.Date, "profile": in.Profile, "memory": in.Memory, "daily": dailyTail(in.Language, in.Daily, dailyTailRunes),
		"transcript": transcript, "conversation_count": strconv.Itoa(in.Conversations),
		"message_count": strconv.Itoa(len(in.Messages)),
	})
	if err != nil {
		return out, &stepError{transient: false, err: err}
	}
	// memory_update and profile_update are whole files: the spec's summary-max-tokens alone
	// would cut any MEMORY.md above a few KB, so the files' size is added (about one token
	// per three bytes, generous for English, about right for Chinese). A template that asks
	// for memory_edits/profile_edits gets an answer that grows with the change, not with the
	// files: summary-max-tokens for the daily entry and as much again for the edits.
	budget := min(p.maxTokens+(len(in.Memory)+len(in.Profile))/3, maxOutputTokens)
	if userTemplate, err := p.prompts.Load(prompt.SummarizeUser, in.Language); err == nil && asksForEdits(sys, userTemplate) {
		budget = min(2*p.maxTokens, maxOutputTokens)
	}
	resp, err := p.c.Complete(ctx, llm.Request{
		Messages:  []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}},
		MaxTokens: budget,
		JSON:      p.json,
	})
	out.TokensIn, out.TokensOut, out.Latency, out.Truncated = resp.TokensIn, resp.TokensOut, resp.Latency, resp.Truncated
	if resp.Model != "" {
		out.Model = resp.Model
	}
	result := "ok"
	defer func() {
		p.m.LLMSeconds.WithLabelValues(ProviderLLM, result).Observe(resp.Latency.Seconds())
		p.m.LLMTokens.WithLabelValues("in").Add(float64(resp.TokensIn))
		p.m.LLMTokens.WithLabelValues("out").Add(float64(resp.TokensOut))
	}()
	if err != nil {
		result = "error"
		if ctx.Err() != nil {
			return out, &stepError{transient: true, err: fmt.Errorf("llm call interrupted: %w", context.Cause(ctx))}
		}
		if llm.ContextLengthExceeded(err) {
			return out, &stepError{transient: false, err: fmt.Errorf("the prompt exceeds the model's context (MEMORY.md, PROFILE.md and the transcript are too long): %w", err)}
		}
		return out, &stepError{transient: llm.Transient(err), err: fmt.Errorf("llm call: %w%s", err, apiDetail(err))}
	}
	ex, err := ParseExtraction(resp.Content)
	if err != nil {
		result = "error"
		if resp.Truncated {
			err = fmt.Errorf("%w (the answer was cut at %d output tokens)", err, budget)
		}
		// A model answers differently next time: retried, then dead-lettered.
		return out, &stepError{transient: true, err: err}
	}
	out.Extraction = ex
	return out, nil
}

// asksForEdits reports whether the templates ask for edits (they name memory_edits or
// profile_edits) rather than only the spec's whole files. The templates are looked at
// unrendered, so that a file or transcript that mentions the fields does not count.
func asksForEdits(templates ...string) bool {
	for _, t := range templates {
		if strings.Contains(t, "memory_edits") || strings.Contains(t, "profile_edits") {
			return true
		}
	}
	return false
}

// offlineProvider writes an extractive digest of the transcript to the daily note and
// never touches PROFILE.md or MEMORY.md; it is used when no LLM is configured.
type offlineProvider struct {
	m *Metrics
}

// Digest limits.
const (
	digestUserMessages = 5
	digestRunes        = 160
)

func (p offlineProvider) extract(ctx context.Context, in extractInput) (extractOutput, error) {
	start := time.Now()
	l := labelsFor(in.Language)
	title := "离线摘要（未配置 LLM）"
	if in.Language == "en" {
		title = "offline digest (no LLM configured)"
	}
	var b strings.Builder
	var users []string
	lastReply := ""
	conv := ""
	flush := func() {
		if conv == "" {
			return
		}
		fmt.Fprintf(&b, "- %s · %s %s\n", title, l.conversation, conv)
		for _, u := range users {
			fmt.Fprintf(&b, "  - %s: %s\n", l.user, u)
		}
		if lastReply != "" {
			fmt.Fprintf(&b, "  - %s: %s\n", l.assistant, lastReply)
		}
		users, lastReply = nil, ""
	}
	for _, m := range in.Messages {
		if m.ConversationID != conv {
			flush()
			conv = m.ConversationID
		}
		text := oneLine(truncateRunes(oneLine(m.Content), digestRunes, "…"))
		if text == "" {
			continue
		}
		if m.Role == "user" {
			if len(users) < digestUserMessages {
				users = append(users, text)
			}
		} else {
			lastReply = text
		}
	}
	flush()
	p.m.LLMSeconds.WithLabelValues(ProviderOffline, "ok").Observe(time.Since(start).Seconds())
	if err := ctx.Err(); err != nil {
		return extractOutput{Provider: ProviderOffline}, &stepError{transient: true, err: err}
	}
	return extractOutput{
		Provider: ProviderOffline,
		Extraction: Extraction{ShouldUpdate: true, DailyEntry: strings.TrimRight(b.String(), "\n"),
			Reason: "offline provider: extractive digest, PROFILE.md and MEMORY.md untouched"},
		Latency: time.Since(start),
	}, nil
}

// apiDetail is the error message an OpenAI-compatible endpoint sent, which openai-go's
// error text leaves out.
func apiDetail(err error) string {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) && apiErr.Message != "" {
		return " (" + apiErr.Message + ")"
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
