// Package embed turns text into vectors through any OpenAI-compatible embeddings endpoint
// (openai-go), and stores vectors compactly as little-endian float32.
package embed

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Embedder embeds texts; vectors come back unit-length, in the order of the texts.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the model; the embedding cache is keyed by it (with the dimensions).
	Model() string
}

// Config configures the OpenAI-compatible client.
type Config struct {
	BaseURL string
	APIKey  string
	Model   string
	// Dimensions, when > 0, is sent (models that can shorten their vectors).
	Dimensions int
	Timeout    time.Duration
	// Batch bounds the texts per request (default 64).
	Batch int
}

// OpenAI is an Embedder over openai-go.
type OpenAI struct {
	c   openai.Client
	cfg Config
}

// NewOpenAI builds an embedder. Base URL and key are always set explicitly so ambient
// OPENAI_* variables never override the configuration; retries are the caller's.
func NewOpenAI(cfg Config) *OpenAI {
	key := cfg.APIKey
	if key == "" {
		key = "none" // local servers accept any key
	}
	opts := []option.RequestOption{option.WithBaseURL(cfg.BaseURL), option.WithAPIKey(key), option.WithMaxRetries(0)}
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	return &OpenAI{c: openai.NewClient(opts...), cfg: cfg}
}

// Model implements Embedder: the model name, with the dimensions when they are set, so
// vectors of two sizes never share a cache key.
func (o *OpenAI) Model() string {
	if o.cfg.Dimensions > 0 {
		return fmt.Sprintf("%s@%d", o.cfg.Model, o.cfg.Dimensions)
	}
	return o.cfg.Model
}

// Embed implements Embedder.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += o.cfg.Batch {
		end := min(start+o.cfg.Batch, len(texts))
		p := openai.EmbeddingNewParams{
			Model: openai.EmbeddingModel(o.cfg.Model),
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts[start:end]},
		}
		if o.cfg.Dimensions > 0 {
			p.Dimensions = openai.Int(int64(o.cfg.Dimensions))
		}
		resp, err := o.c.Embeddings.New(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("embed %d texts with %s: %w", end-start, o.cfg.Model, err)
		}
		if len(resp.Data) != end-start {
			return nil, fmt.Errorf("embed with %s: asked for %d vectors, got %d", o.cfg.Model, end-start, len(resp.Data))
		}
		batch := make([][]float32, end-start)
		for _, d := range resp.Data {
			if d.Index < 0 || int(d.Index) >= len(batch) || len(d.Embedding) == 0 {
				return nil, fmt.Errorf("embed with %s: bad vector index %d (len %d)", o.cfg.Model, d.Index, len(d.Embedding))
			}
			v := make([]float32, len(d.Embedding))
			for i, x := range d.Embedding {
				v[i] = float32(x)
			}
			batch[d.Index] = Normalize(v)
		}
		out = append(out, batch...)
	}
	return out, nil
}

// Normalize scales v to unit length in place (a zero vector stays zero) and returns it.
func Normalize(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// Dot is the inner product (the cosine of unit vectors). Lengths must match.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Encode stores v as little-endian float32.
func Encode(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// Decode reads a vector stored by Encode.
func Decode(b []byte) ([]float32, error) {
	return DecodeInto(nil, b)
}

// DecodeInto appends the vector stored in b to dst (one backing array for many vectors keeps
// a scan over them in cache) and returns the new vector, a slice of dst's array.
func DecodeInto(dst []float32, b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("vector blob of %d bytes is not a multiple of 4", len(b))
	}
	start := len(dst)
	dst = append(dst, make([]float32, len(b)/4)...)
	v := dst[start:len(dst):len(dst)]
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
