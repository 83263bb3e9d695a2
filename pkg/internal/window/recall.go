package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// Recaller searches an agent's memory (*recall.Searcher).
type Recaller interface {
	Search(ctx context.Context, agentID int64, q recall.Query) (recall.Result, error)
}

// WithRecall enables the optional recall step of context assembly and the search guidance
// in the system message.
func WithRecall(r Recaller) Option { return func(s *Service) { s.recall = r } }

// RecallRequest asks for recalled memory in the system message.
type RecallRequest struct {
	// TopK is the most snippets (1–20; omitted = 5).
	TopK *int `json:"topK,omitempty"`
	// MaxTokens bounds the recall block (1–32000; omitted = 800); it is also kept within
	// the budget.
	MaxTokens *int `json:"maxTokens,omitempty"`
	// Query is what to search for (omitted = the current user message; given, it must say
	// something).
	Query *string `json:"query,omitempty"`
}

// RecallInfo reports what the recall step did.
type RecallInfo = api.ContextRecall

// Markers around recalled snippets in the system message.
const (
	RecallOpen  = "<memory-recall>"
	RecallClose = "</memory-recall>"
)

func (r *RecallRequest) validate() error {
	if r == nil {
		return nil
	}
	switch {
	case r.TopK != nil && (*r.TopK < 1 || *r.TopK > 20):
		return invalidf("recall.topK must be between 1 and 20 (or omitted for 5), got %d", *r.TopK)
	case r.MaxTokens != nil && (*r.MaxTokens < 1 || *r.MaxTokens > 32000):
		return invalidf("recall.maxTokens must be between 1 and 32000 (or omitted for 800), got %d", *r.MaxTokens)
	case r.Query != nil:
		// The search's own rules (empty, invalid UTF-8 or a replaced lone surrogate, too long).
		if err := recall.ValidateText(*r.Query, 0); err != nil {
			return invalidf("recall.query: %s", err.Error())
		}
	}
	return nil
}

// searchGuidance tells the model when to search (the tool is offered when recall is on).
func searchGuidance(lang string) string {
	if lang == "en" {
		return "You can search your whole memory with search_workspace_memory (daily notes, MEMORY.md and other files; only MEMORY.md and PROFILE.md are shown above). Search before answering when the user refers to earlier conversations, dates, decisions, preferences, people, order numbers, host names or anything you do not see here; read more lines with read_workspace_memory_lines."
	}
	return "你可以用 search_workspace_memory 检索全部记忆（每日笔记、MEMORY.md 及其他文件；上文只展示了 MEMORY.md 和 PROFILE.md）。当用户提到以前的对话、日期、决定、偏好、人物、订单号、主机名，或任何你在这里看不到的内容时，先检索再回答；需要更多上下文时用 read_workspace_memory_lines 读取。"
}

// recallBlock runs the recall step: the snippets that fit maxTokens (and room, what the
// budget leaves), formatted as a marked block, and what was done.
func (s *Service) recallBlock(ctx context.Context, tk tokens.Tokenizer, lang string, req Request, room int) (string, *RecallInfo, error) {
	r := req.Recall
	topK, maxTok := 5, 800
	if r.TopK != nil {
		topK = *r.TopK
	}
	if r.MaxTokens != nil {
		maxTok = *r.MaxTokens
	}
	maxTok = min(maxTok, room)
	var q string
	if r.Query != nil {
		q = strings.TrimSpace(*r.Query)
	} else {
		q = truncateRunes(strings.TrimSpace(req.UserMessage), 1000)
	}
	info := &RecallInfo{Query: q}
	if s.recall == nil {
		info.Notice = "memory search is not enabled on this server"
		return "", info, nil
	}
	res, err := s.recall.Search(ctx, req.AgentID, recall.Query{Text: q, MaxResults: topK, Auto: true})
	if err != nil {
		if errors.Is(err, recall.ErrInvalid) && r.Query != nil {
			return "", nil, invalidf("recall.query: %s", err.Error())
		}
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		info.Degraded = true
		info.Notice = "memory search failed; no recall: " + err.Error()
		return "", info, nil
	}
	info.Mode, info.Degraded, info.Notice, info.Hits = res.Mode, res.Degraded, res.Notice, len(res.Hits)
	if len(res.Hits) == 0 || maxTok <= 0 {
		return "", info, nil
	}
	head := "Recalled from your memory files (search results for the current message; verify before relying on them):"
	if lang != "en" {
		head = "从你的记忆文件中检索到的内容（针对当前消息的搜索结果，使用前请核实）："
	}
	var b strings.Builder
	b.WriteString(RecallOpen + "\n" + head + "\n")
	used := tk.Count(b.String() + RecallClose)
	for _, h := range res.Hits {
		entry := fmt.Sprintf("[%s:%d-%d, %s]\n%s\n", h.Filename, h.StartLine, h.EndLine, h.Date, strings.TrimSpace(h.Snippet))
		n := tk.Count(entry)
		if used+n > maxTok {
			break
		}
		b.WriteString(entry)
		used += n
		info.Included++
		info.Sources = append(info.Sources, h)
	}
	if info.Included == 0 {
		return "", info, nil
	}
	b.WriteString(RecallClose)
	return b.String(), info, nil
}

func truncateRunes(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	for maxBytes > 0 && !utf8.RuneStart(s[maxBytes]) {
		maxBytes--
	}
	return s[:maxBytes]
}
