package llm_test

// BenchmarkComplete compares, in the same run and against the same fake endpoint, the CPU
// and allocations of one Complete call on three paths:
//
//   - baseline: the client as it was (openai-go's Chat.Completions.New with
//     ChatCompletionNewParams, answer decoded into openai.ChatCompletion);
//   - current: llm.OpenAI.Complete (body encoded and answer decoded by this package,
//     sent through openai-go's request pipeline);
//   - raw: a bare net/http POST with encoding/json, the floor.
//
// With fake=inprocess the fake model is an httptest server in this process, so ns/op and
// cpu-ns/op include its work; with fake=external it runs in a child process
// (llmtest.NewExternal), so cpu-ns/op (this process's user+system CPU, getrusage) is the
// client's alone.
//
//	go test ./pkg/internal/llm -run '^$' -bench BenchmarkComplete -benchmem -count 5

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

// benchReply answers like an extraction: a JSON object of a few facts.
func benchReply(r llmtest.Received) llmtest.Reply {
	return llmtest.Reply{Content: `{"facts":[{"subject":"用户","predicate":"prefers","object":"dark mode in the editor","confidence":0.9},` +
		`{"subject":"project","predicate":"deadline","object":"2026-03-01","confidence":0.8},` +
		`{"subject":"用户","predicate":"works on","object":"the billing service (Go, MariaDB)","confidence":0.85}],"summary":"` +
		strings.Repeat("The user discussed deployment. ", 6) + `"}`, TokensIn: 1200, TokensOut: 180}
}

// benchRequest is the size of an extraction: a system prompt and a conversation.
func benchRequest() llm.Request {
	sys := strings.Repeat("Extract durable facts about the user as JSON. Keep each fact short. ", 22)
	user := strings.Repeat("user: 我想把部署流程改成 blue-green，数据库迁移怎么办？\nassistant: Run the migration first, then switch traffic. ", 20)
	return llm.Request{Messages: []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}}, MaxTokens: 1024, JSON: true}
}

func BenchmarkComplete(b *testing.B) {
	req := benchRequest()
	for _, where := range []string{"inprocess", "external"} {
		b.Run("fake="+where, func(b *testing.B) {
			var cfg llm.Config
			if where == "inprocess" {
				cfg = llmtest.New(b, benchReply).Config()
			} else {
				cfg = llmtest.NewExternal(b, "bench").Config()
			}
			baseline, current, raw := llm.NewOpenAI(cfg), llm.NewOpenAI(cfg), newRawClient(cfg)
			paths := []struct {
				name string
				call func(context.Context, llm.Request) (llm.Response, error)
			}{
				{"baseline", func(ctx context.Context, r llm.Request) (llm.Response, error) {
					return llm.CompleteBaseline(baseline, ctx, r)
				}},
				{"current", current.Complete},
				{"raw", raw.complete},
			}
			for _, p := range paths {
				b.Run("path="+p.name, func(b *testing.B) {
					ctx := context.Background()
					if resp, err := p.call(ctx, req); err != nil || resp.TokensIn != 1200 || !strings.HasPrefix(resp.Content, `{"facts"`) {
						b.Fatalf("warm-up call: %+v %v", resp, err)
					}
					b.ReportAllocs()
					cpu0 := processCPU(b)
					for b.Loop() {
						if _, err := p.call(ctx, req); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}

// processCPU is this process's user+system CPU time.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawClient is the floor: the same request and answer over net/http and encoding/json,
// with no SDK.
type rawClient struct {
	url, auth, model string
	timeout          time.Duration
	hc               *http.Client
}

func newRawClient(cfg llm.Config) *rawClient {
	return &rawClient{url: cfg.BaseURL + "chat/completions", auth: "Bearer " + cfg.APIKey, model: cfg.Model, timeout: cfg.Timeout,
		hc: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
}

func (c *rawClient) complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	type msg struct {
		Content string `json:"content"`
		Role    string `json:"role"`
	}
	body := struct {
		Messages       []msg             `json:"messages"`
		Model          string            `json:"model"`
		MaxTokens      int               `json:"max_tokens,omitempty"`
		ResponseFormat map[string]string `json:"response_format,omitempty"`
	}{Model: c.model, MaxTokens: req.MaxTokens}
	for _, m := range req.Messages {
		body.Messages = append(body.Messages, msg{m.Content, m.Role})
	}
	if req.JSON {
		body.ResponseFormat = map[string]string{"type": "json_object"}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	if err != nil {
		return llm.Response{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", c.auth)
	start := time.Now()
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	lat := time.Since(start)
	if err != nil {
		return llm.Response{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return llm.Response{}, fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return llm.Response{}, err
	}
	if len(out.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("no choices")
	}
	return llm.Response{Content: out.Choices[0].Message.Content, Model: out.Model, TokensIn: out.Usage.PromptTokens,
		TokensOut: out.Usage.CompletionTokens, Latency: lat, Truncated: out.Choices[0].FinishReason == "length"}, nil
}
