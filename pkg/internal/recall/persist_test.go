package recall

import (
	"encoding/binary"
	"math/rand"
	"testing"
	"time"
)

// decodeSnapshot survives any body behind a valid checksum (a bug, or a file of the same
// version written otherwise): each truncation and random corruption is an error or a
// snapshot, never a panic; the intact body decodes to the same chunks.
func TestDecodeSnapshotNeverPanics(t *testing.T) {
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	chunks := []cachedChunk{
		{filename: "memory/2026-05-01.md", ordinal: 0, startLine: 1, end: 3, heading: "2026-05-01", text: "the router is rt-lab-01", terms: "router rt lab 01", hash: "h1", fileVersion: 2, date: day, dated: true, vec: []float32{0.5, -0.25}},
		{filename: "memory/2026-05-01.md", ordinal: 1, startLine: 4, end: 5, text: "咖啡 预算", terms: "咖啡 预算", hash: "h2", fileVersion: 2, date: day, dated: true, vec: []float32{1, 0}},
		{filename: "notes.md", text: "", terms: "", hash: "h3"},
	}
	files := map[string]fileState{"memory/2026-05-01.md": {fileID: 7, version: 2}, "notes.md": {fileID: 9, version: 1, pending: true, format: 3}}
	snap := newSnapshot(42, 5, "m@2", chunks, files)
	b, ok := encodeSnapshot(snap)
	if !ok {
		t.Fatal("a fresh snapshot is not encoded")
	}
	got, err := decodeSnapshot(b, 42, "m@2")
	if err != nil {
		t.Fatal(err)
	}
	for k := range chunks {
		a, w := got.chunks[k], snap.chunks[k]
		if a.filename != w.filename || a.text != w.text || a.terms != w.terms || !a.date.Equal(w.date) || a.dated != w.dated ||
			len(a.vec) != len(w.vec) || (len(a.vec) > 0 && a.vec[1] != w.vec[1]) || a.ordinal != w.ordinal || a.hash != w.hash {
			t.Fatalf("chunk %d: %+v, want %+v", k, a, w)
		}
	}
	if got.generation != 5 || got.files["notes.md"] != files["notes.md"] || got.bytes != snap.bytes {
		t.Fatalf("snapshot %d %v %d bytes, want 5 %v %d", got.generation, got.files, got.bytes, files, snap.bytes)
	}
	if _, err := decodeSnapshot(b, 43, "m@2"); err == nil {
		t.Fatal("agent 42's file loaded for agent 43")
	}
	if _, err := decodeSnapshot(b, 42, "other@2"); err == nil {
		t.Fatal("a file of another model loaded")
	}
	// The fields and strings as written, sealed again after each cut or change.
	nf := binary.LittleEndian.Uint64(b[8:])
	fields, strs := b[snapHeader:snapHeader+nf], b[snapHeader+nf:]
	reseal := func(f, s []byte) []byte { return seal(append(make([]byte, snapHeader), f...), s) }
	if _, err := decodeSnapshot(reseal(fields, strs), 42, "m@2"); err != nil {
		t.Fatalf("resealed: %v", err)
	}
	for n := range fields {
		if _, err := decodeSnapshot(reseal(fields[:n], strs), 42, "m@2"); err == nil {
			t.Fatalf("fields truncated to %d of %d bytes: no error", n, len(fields))
		}
	}
	for n := range strs {
		if _, err := decodeSnapshot(reseal(fields, strs[:n]), 42, "m@2"); err == nil {
			t.Fatalf("strings truncated to %d of %d bytes: no error", n, len(strs))
		}
	}
	rnd := rand.New(rand.NewSource(1))
	for range 5000 {
		bf, bs := append([]byte(nil), fields...), append([]byte(nil), strs...)
		for k := 1 + rnd.Intn(3); k > 0; k-- {
			bf[rnd.Intn(len(bf))] = byte(rnd.Intn(256))
		}
		_, _ = decodeSnapshot(reseal(bf, bs), 42, "m@2")
	}
	for n := range b {
		if _, err := decodeSnapshot(b[:n], 42, "m@2"); err == nil {
			t.Fatalf("file truncated to %d of %d bytes: no error", n, len(b))
		}
	}
}
