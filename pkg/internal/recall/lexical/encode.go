package lexical

import (
	"encoding/binary"
	"errors"
	"strings"
)

// AppendBinary appends the segment's encoding (its documents' lengths and posting lists)
// to b, for DecodeSegment.
func (sg *Segment) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(sg.docLen)))
	for _, l := range sg.docLen {
		b = binary.AppendUvarint(b, uint64(l))
	}
	b = binary.AppendUvarint(b, uint64(len(sg.postings)))
	terms := make([]string, len(sg.postings))
	for t, id := range sg.vocab {
		terms[id] = t
	}
	for id, t := range terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
		ps := sg.postings[id]
		b = binary.AppendUvarint(b, uint64(len(ps)))
		prev := uint32(0)
		for _, p := range ps {
			b = binary.AppendUvarint(b, uint64(p.doc-prev))
			b = binary.AppendUvarint(b, uint64(p.tf))
			prev = p.doc
		}
	}
	return b, nil
}

// errSegment is any encoding DecodeSegment cannot take.
var errSegment = errors.New("lexical: malformed segment encoding")

// DecodeSegment reads a segment AppendBinary wrote at the start of b and returns it with
// the bytes after it. A malformed encoding (truncated, counts that do not add up, a
// document out of range or listed twice) is an error, never a panic.
func DecodeSegment(b []byte) (*Segment, []byte, error) {
	d := decoder{b: b}
	n := d.count()
	sg := &Segment{vocab: map[string]uint32{}, docLen: make([]uint32, 0, n)}
	for range n {
		sg.docLen = append(sg.docLen, uint32(d.uint(1<<32-1)))
	}
	terms := d.count()
	sg.postings = make([][]posting, 0, terms)
	for id := range terms {
		t := strings.Clone(string(d.bytes(d.count())))
		if _, dup := sg.vocab[t]; dup || t == "" {
			return nil, nil, errSegment
		}
		sg.vocab[t] = uint32(id)
		np := d.count()
		if np > n {
			return nil, nil, errSegment
		}
		ps := make([]posting, np)
		doc := uint64(0)
		for k := range ps {
			delta := d.uint(uint64(n))
			if k > 0 && delta == 0 {
				return nil, nil, errSegment
			}
			doc += delta
			if doc >= uint64(n) {
				return nil, nil, errSegment
			}
			ps[k] = posting{doc: uint32(doc), tf: uint32(d.uint(1<<32 - 1))}
		}
		sg.postings = append(sg.postings, ps)
		if d.err != nil {
			return nil, nil, errSegment
		}
	}
	if d.err != nil {
		return nil, nil, errSegment
	}
	sg.bytes = len(sg.docLen) * 4
	for t, id := range sg.vocab {
		sg.bytes += len(t) + 24 + cap(sg.postings[id])*8
	}
	return sg, d.b, nil
}

// decoder reads uvarints and byte runs, remembering the first error (then reading zeros).
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uint(most uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > most {
		d.err = errSegment
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length, at most the bytes left (each counted item takes one byte or more).
func (d *decoder) count() int { return int(d.uint(uint64(len(d.b)))) }

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = errSegment
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}
