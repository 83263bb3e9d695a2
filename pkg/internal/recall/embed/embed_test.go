package embed

import (
	"math"
	"testing"
)

func TestEncodeDecodeDot(t *testing.T) {
	v := Normalize([]float32{3, 4, 0, 0, 1, -2, 0.5})
	var block []float32
	a, err := DecodeInto(block, Encode(v))
	if err != nil {
		t.Fatal(err)
	}
	block = block[:0]
	block = append(block, a...)
	b, err := DecodeInto(block, Encode([]float32{1, 0, 0, 0, 0, 0, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(Dot(a, a))-1) > 1e-6 {
		t.Errorf("unit vector · itself = %v", Dot(a, a))
	}
	if math.Abs(float64(Dot(a, b)-v[0])) > 1e-6 || len(a) != 7 || len(b) != 7 {
		t.Errorf("dot = %v, want %v", Dot(a, b), v[0])
	}
	if _, err := Decode([]byte{1, 2, 3}); err == nil {
		t.Error("a blob of 3 bytes must be refused")
	}
}
