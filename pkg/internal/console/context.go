package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/window"
)

// previewForm is the context preview's form as typed.
type previewForm struct {
	Conversation string
	Message      string
	Model        string
	MaxTokens    string
	Recall       bool
}

// preview is an assembled context window as the page shows it.
type preview struct {
	R     *window.Result
	Parts []budgetPart
	Free  int
}

// contextPreview assembles the context window for a conversation exactly as the chat
// service would get it (POST …/conversations/{id}/context): the same service, so it may
// compact (an LLM call, cached and shared) and request a flush, as the real call does.
func (c *Console) contextPreview(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	if c.d.Window == nil {
		return errStatus(http.StatusNotFound, "the context window is not available in this process")
	}
	f := previewForm{Conversation: strings.TrimSpace(q.r.PostFormValue("conversationId")), Message: q.r.PostFormValue("userMessage"),
		Model: strings.TrimSpace(q.r.PostFormValue("model")), MaxTokens: strings.TrimSpace(q.r.PostFormValue("maxInputTokens")),
		Recall: q.r.PostFormValue("recall") == "on"}
	// A preview: no model call, nothing cached or published (a person is only looking).
	req := window.Request{AgentID: id, ConversationID: f.Conversation, UserMessage: f.Message, Model: f.Model, Preview: true}
	if f.MaxTokens != "" {
		n, err := strconv.Atoi(f.MaxTokens)
		if err != nil {
			return c.promptWith(q, id, f, nil, "maxInputTokens must be a whole number, got "+strconv.Quote(f.MaxTokens))
		}
		req.MaxInputTokens = n
	}
	if f.Recall {
		req.Recall = &window.RecallRequest{}
	}
	res, err := c.d.Window.Assemble(q.r.Context(), req)
	var inv *window.InvalidError
	var big *window.TooLargeError
	if errors.As(err, &inv) || errors.As(err, &big) {
		return c.promptWith(q, id, f, nil, err.Error())
	}
	if err != nil {
		return err
	}
	t := res.Tokens
	p := &preview{R: res}
	add := func(name string, n int) {
		if n > 0 {
			p.Parts = append(p.Parts, budgetPart{Name: name, Tokens: n})
		}
	}
	add("system", t.System-t.Workspace-t.Recall)
	add("workspace", t.Workspace)
	add("recall", t.Recall)
	add("summary", t.Summary)
	add("history", t.History)
	add("current", t.Current+t.Priming)
	p.Free = max(t.Budget-t.Total, 0)
	off := 0.0
	for i := range p.Parts {
		if t.Budget > 0 {
			p.Parts[i].Percent = 100 * float64(p.Parts[i].Tokens) / float64(t.Budget)
		}
		p.Parts[i].Offset = off
		off += p.Parts[i].Percent
	}
	return c.promptWith(q, id, f, p, "")
}

type searchData struct {
	AgentID int64
	Q       string
	Prefix  string
	Since   string
	Res     *recall.Result
	Err     string
	Took    time.Duration
}

// searchPage is the search playground: the agent's memory searched as the recall tools and
// REST search do, each hit with its score parts.
func (c *Console) searchPage(q *req) error {
	id, err := q.agentID()
	if err != nil {
		return err
	}
	if c.d.Search == nil {
		return errStatus(http.StatusNotFound, "memory search is not enabled in this process (mate.memory.search.enabled)")
	}
	v := q.r.URL.Query()
	d := searchData{AgentID: id, Q: v.Get("q"), Prefix: v.Get("prefix"), Since: v.Get("since")}
	if strings.TrimSpace(d.Q) != "" {
		rq := recall.Query{Text: d.Q, FilenamePrefix: d.Prefix}
		if d.Since != "" {
			t, err := time.Parse("2006-01-02", d.Since)
			if err != nil {
				d.Err = "since must be a date (2006-01-02), got " + strconv.Quote(d.Since)
			}
			rq.Since = t
		}
		if d.Err == "" {
			start := time.Now()
			res, err := c.d.Search.Search(q.r.Context(), id, rq)
			d.Took = time.Since(start).Round(10 * time.Microsecond)
			if errors.Is(err, recall.ErrInvalid) {
				d.Err = err.Error()
			} else if err != nil {
				return err
			} else {
				d.Res = &res
			}
		}
	}
	return c.render(q, http.StatusOK, "search", q.lang.T("search.title"), "agents", d)
}
