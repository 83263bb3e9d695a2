package llm

import "context"

// CompleteBaseline is Complete over the request path as it was before (see
// baseline_test.go), for the external tests and benchmarks, which use llmtest.
func CompleteBaseline(o *OpenAI, ctx context.Context, req Request) (Response, error) {
	return o.completeBaseline(ctx, req)
}
