package tokens

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestEncodingFor(t *testing.T) {
	cases := map[string]string{
		"gpt-4o": O200K, "gpt-4o-mini": O200K, "gpt-4o-2024-08-06": O200K, "chatgpt-4o-latest": O200K,
		"gpt-4.1": O200K, "gpt-4.1-nano": O200K, "gpt-4.5-preview": O200K, "gpt-5": O200K, "gpt-5-mini": O200K,
		"o1": O200K, "o1-mini": O200K, "o3": O200K, "o3-mini": O200K, "o4-mini": O200K, "openai/gpt-4o": O200K,
		"GPT-4O": O200K, "gpt-oss-120b": O200K,
		"gpt-4": CL100K, "gpt-4-turbo": CL100K, "gpt-4-0613": CL100K, "gpt-3.5-turbo": CL100K, "gpt-35-turbo": CL100K,
		"deepseek-chat": Estimate, "deepseek-reasoner": Estimate, "qwen-max": Estimate, "qwen2.5-72b-instruct": Estimate,
		"llama3.1:8b": Estimate, "": Estimate, "o10-future": Estimate, "gpt-40": Estimate,
	}
	for model, want := range cases {
		if got := EncodingFor(model); got != want {
			t.Errorf("EncodingFor(%q) = %s, want %s", model, got, want)
		}
	}
}

// Reference counts from OpenAI's tiktoken (the cookbook's comparison of encodings).
func TestExactCounts(t *testing.T) {
	c := NewCounter()
	cases := []struct {
		enc, text string
		want      int
	}{
		{CL100K, "tiktoken is great!", 6},
		{O200K, "tiktoken is great!", 6},
		{CL100K, "antidisestablishmentarianism", 6},
		{O200K, "antidisestablishmentarianism", 6},
		{CL100K, "2 + 2 = 4", 7},
		{O200K, "2 + 2 = 4", 7},
		{CL100K, "お誕生日おめでとう", 9},
		{O200K, "お誕生日おめでとう", 8},
		{O200K, "", 0},
		// Special tokens in user text are text, not control tokens (and never panic).
		{O200K, "<|endoftext|>", 7},
	}
	for _, tc := range cases {
		tk, err := c.ByEncoding(tc.enc)
		if err != nil {
			t.Fatal(err)
		}
		if !tk.Exact() || tk.Name() != tc.enc {
			t.Fatalf("%s: got tokenizer %s exact=%v", tc.enc, tk.Name(), tk.Exact())
		}
		if got := tk.Count(tc.text); got != tc.want {
			t.Errorf("%s %q = %d tokens, want %d", tc.enc, tc.text, got, tc.want)
		}
	}
	// The exact ids of the cookbook's example.
	o := c.cl100k.bpe.t.EncodeOrdinary("tiktoken is great!")
	want := []int{83, 1609, 5963, 374, 2294, 0}
	if len(o) != len(want) {
		t.Fatalf("cl100k ids %v, want %v", o, want)
	}
	for i := range o {
		if o[i] != want[i] {
			t.Fatalf("cl100k ids %v, want %v", o, want)
		}
	}
}

type noNetwork struct{ calls int }

func (n *noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	n.calls++
	return nil, errors.New("network access in a test that must run offline: " + r.URL.String())
}

// The vocabularies come from the embedded files: loading must not touch the network (the
// default loader of tiktoken-go downloads from openaipublic.blob.core.windows.net).
func TestLoadsOffline(t *testing.T) {
	nn := &noNetwork{}
	old := http.DefaultTransport
	http.DefaultTransport = nn
	t.Cleanup(func() { http.DefaultTransport = old })
	t.Setenv("TIKTOKEN_CACHE_DIR", t.TempDir())
	c := NewCounter()
	for _, enc := range []string{O200K, CL100K} {
		tk, err := c.ByEncoding(enc)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if n := tk.Count("hello world"); n != 2 {
			t.Errorf("%s: hello world = %d tokens, want 2", enc, n)
		}
	}
	if nn.calls != 0 {
		t.Fatalf("%d network calls while loading vocabularies", nn.calls)
	}
}

func TestCounterSharedAcrossGoroutines(t *testing.T) {
	c := NewCounter()
	text := strings.Repeat("上下文窗口 context window 128000 tokens; ", 20)
	want := func() int { tk, _ := c.For("gpt-4o"); return tk.Count(text) }()
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := c.For("gpt-4o-mini")
			if err != nil {
				errs <- err.Error()
				return
			}
			if got := tk.Count(text); got != want {
				errs <- "concurrent count differs"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestMessageTokens(t *testing.T) {
	c := NewCounter()
	o, _ := c.ByEncoding(O200K)
	// OpenAI's cookbook: 3 per message + role + content (+1 per name), 3 to prime the reply.
	plain := MessageTokens(o, Message{Role: "user", Content: "hello world"})
	if plain != 3+1+2 {
		t.Errorf("plain message = %d, want 6", plain)
	}
	named := MessageTokens(o, Message{Role: "user", Content: "hello world", Name: "lin"})
	if named <= plain+1 {
		t.Errorf("a name must cost tokens: %d vs %d", named, plain)
	}
	call := Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"北京"}`}}}
	if got, min := MessageTokens(o, call), 3+1+PerToolCall+o.Count("get_weather")+o.Count(`{"city":"北京"}`); got != min {
		t.Errorf("tool call message = %d, want %d", got, min)
	}
	if got := ChatTokens(o, []Message{{Role: "user", Content: "hello world"}}); got != plain+ReplyPriming {
		t.Errorf("chat = %d, want %d", got, plain+ReplyPriming)
	}
	// Estimates are never zero for non-empty text.
	if n := c.Estimator().Count("x"); n != 1 {
		t.Errorf("estimate of one char = %d", n)
	}
}
