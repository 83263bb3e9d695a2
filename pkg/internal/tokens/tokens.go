// Package tokens counts the tokens of chat messages: exactly with the model's own BPE
// (o200k_base, cl100k_base; the vocabularies are embedded in the binary and never downloaded)
// when the model is known, and with an estimate calibrated against o200k_base otherwise.
//
// A Counter owns the encoders. It loads each vocabulary the first time a model needs it and
// shares it between goroutines; build one per process and pass it to whoever counts.
package tokens

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding names.
const (
	O200K    = "o200k_base"
	CL100K   = "cl100k_base"
	Estimate = "estimate"
)

// Per-message overheads in OpenAI's chat format: every message is wrapped in
// <|start|>{role}<|message|>...<|end|>, a name costs one more token, and the reply is primed
// with <|start|>assistant<|message|>.
const (
	PerMessage   = 3
	PerName      = 1
	ReplyPriming = 3
	// PerToolCall covers the wrapping of one function call (its id and type are not billed
	// as text; the name and the JSON arguments are counted as text).
	PerToolCall = 3
)

// Tokenizer counts the tokens of a text for one encoding.
type Tokenizer interface {
	// Count returns the number of tokens of text.
	Count(text string) int
	// Name is the encoding name (o200k_base, cl100k_base, estimate).
	Name() string
	// Exact is true for a real BPE, false for the estimate.
	Exact() bool
}

// Counter picks and caches tokenizers by model name.
type Counter struct {
	o200k  lazyBPE
	cl100k lazyBPE
	est    estimator
}

// NewCounter returns a counter; vocabularies are loaded lazily, once.
func NewCounter() *Counter {
	return &Counter{
		o200k:  lazyBPE{name: O200K, load: loadO200K},
		cl100k: lazyBPE{name: CL100K, load: loadCL100K},
	}
}

// EncodingFor names the encoding used for model: o200k_base for gpt-4o, gpt-4.1, gpt-4.5,
// gpt-5 and the o-series; cl100k_base for gpt-4 and gpt-3.5; the estimate otherwise
// (DeepSeek, Qwen, Llama, unknown, empty). A provider prefix ("openai/gpt-4o") is ignored.
func EncodingFor(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case hasModelPrefix(m, "gpt-4o"), hasModelPrefix(m, "chatgpt-4o"), hasModelPrefix(m, "gpt-4.1"),
		hasModelPrefix(m, "gpt-4.5"), hasModelPrefix(m, "gpt-5"), hasModelPrefix(m, "gpt-oss"),
		hasModelPrefix(m, "o1"), hasModelPrefix(m, "o3"), hasModelPrefix(m, "o4"):
		return O200K
	case hasModelPrefix(m, "gpt-4"), hasModelPrefix(m, "gpt-3.5"), hasModelPrefix(m, "gpt-35"),
		hasModelPrefix(m, "text-embedding-3"), m == "text-embedding-ada-002":
		return CL100K
	}
	return Estimate
}

// hasModelPrefix matches "o1" against "o1", "o1-mini", "o1-2024-12-17" but not "o10x".
func hasModelPrefix(m, p string) bool {
	if !strings.HasPrefix(m, p) {
		return false
	}
	rest := m[len(p):]
	return rest == "" || strings.ContainsRune("-:.@_", rune(rest[0]))
}

// For returns the tokenizer for model. Loading a vocabulary cannot fail in practice (it is
// embedded); if it ever does, the estimate is returned and the error reported.
func (c *Counter) For(model string) (Tokenizer, error) {
	return c.ByEncoding(EncodingFor(model))
}

// ByEncoding returns the tokenizer named enc (o200k_base, cl100k_base or estimate).
func (c *Counter) ByEncoding(enc string) (Tokenizer, error) {
	switch enc {
	case O200K:
		return c.o200k.get()
	case CL100K:
		return c.cl100k.get()
	case Estimate:
		return c.est, nil
	}
	return c.est, fmt.Errorf("unknown encoding %q; known: %s, %s, %s", enc, O200K, CL100K, Estimate)
}

// Estimator returns the calibrated estimate.
func (c *Counter) Estimator() Tokenizer { return c.est }

type lazyBPE struct {
	name string
	load func() (*tiktoken.Tiktoken, error)
	once sync.Once
	bpe  *bpe
	err  error
}

func (l *lazyBPE) get() (Tokenizer, error) {
	l.once.Do(func() {
		t, err := l.load()
		if err != nil {
			l.err = fmt.Errorf("load %s vocabulary: %w", l.name, err)
			return
		}
		l.bpe = &bpe{name: l.name, t: t}
	})
	if l.err != nil {
		return estimator{}, l.err
	}
	return l.bpe, nil
}

type bpe struct {
	name string
	t    *tiktoken.Tiktoken
}

func (b *bpe) Count(text string) int {
	if text == "" {
		return 0
	}
	// EncodeOrdinary treats "<|endoftext|>" in user text as text, as the API does.
	return len(b.t.EncodeOrdinary(text))
}
func (b *bpe) Name() string { return b.name }
func (b *bpe) Exact() bool  { return true }

// The vocabularies are read from the embedded files of tiktoken-go-loader and the encoders
// are built here, so that tiktoken-go's package-level loader (which downloads by default)
// is never consulted and never mutated. The patterns and special tokens are tiktoken's.
func loadO200K() (*tiktoken.Tiktoken, error) {
	return build(O200K, "o200k_base.tiktoken", strings.Join([]string{
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`\p{N}{1,3}`,
		` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
		`\s*[\r\n]+`,
		`\s+(?!\S)`,
		`\s+`,
	}, "|"), map[string]int{tiktoken.ENDOFTEXT: 199999, tiktoken.ENDOFPROMPT: 200018})
}

func loadCL100K() (*tiktoken.Tiktoken, error) {
	return build(CL100K, "cl100k_base.tiktoken",
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		map[string]int{tiktoken.ENDOFTEXT: 100257, tiktoken.FIM_PREFIX: 100258, tiktoken.FIM_MIDDLE: 100259,
			tiktoken.FIM_SUFFIX: 100260, tiktoken.ENDOFPROMPT: 100276})
}

func build(name, file, pattern string, special map[string]int) (*tiktoken.Tiktoken, error) {
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(file)
	if err != nil {
		return nil, err
	}
	core, err := tiktoken.NewCoreBPE(ranks, special, pattern)
	if err != nil {
		return nil, err
	}
	set := make(map[string]any, len(special))
	for k := range special {
		set[k] = true
	}
	enc := &tiktoken.Encoding{Name: name, PatStr: pattern, MergeableRanks: ranks, SpecialTokens: special}
	return tiktoken.NewTiktoken(core, enc, set), nil
}
