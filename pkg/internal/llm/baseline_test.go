package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// This file keeps the request path as it was before the client encoded the body and
// decoded the answer itself (openai-go's Chat.Completions.New with ChatCompletionNewParams
// and the full ChatCompletion), as the baseline the equivalence test and BenchmarkComplete
// compare the current path with.

// completeBaseline is Complete over the baseline path.
func (o *OpenAI) completeBaseline(ctx context.Context, req Request) (Response, error) {
	useJSON := req.JSON && o.jsonMode.Load()
	resp, err := o.completeBaselineOnce(ctx, req, useJSON)
	if err != nil && useJSON && rejectsResponseFormat(err) {
		o.jsonMode.Store(false)
		resp, err = o.completeBaselineOnce(ctx, req, false)
	}
	return resp, err
}

func (o *OpenAI) completeBaselineOnce(ctx context.Context, req Request, useJSON bool) (Response, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(o.model)}
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case "assistant":
			params.Messages = append(params.Messages, openai.AssistantMessage(m.Content))
		default:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		}
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if useJSON {
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONObject: &shared.ResponseFormatJSONObjectParam{},
		}
	}
	start := time.Now()
	c, err := o.c.Chat.Completions.New(ctx, params)
	lat := time.Since(start)
	if err != nil {
		return Response{Latency: lat}, fmt.Errorf("llm %s: %w", o.model, err)
	}
	if len(c.Choices) == 0 {
		return Response{Latency: lat}, &Error{Transient: true, Msg: "llm answered with no choices"}
	}
	return Response{
		Content:   c.Choices[0].Message.Content,
		Model:     c.Model,
		TokensIn:  int(c.Usage.PromptTokens),
		TokensOut: int(c.Usage.CompletionTokens),
		Latency:   lat,
		Truncated: c.Choices[0].FinishReason == "length",
	}, nil
}
