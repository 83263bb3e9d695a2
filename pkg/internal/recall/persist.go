package recall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/matememory/matememory/pkg/internal/recall/lexical"
)

// A large agent's snapshot is also kept in a file (snapshotFiles), so that a cold load (a
// restart, an eviction) reads one file instead of every chunk and vector row, and skips
// building the posting lists. The file is a cache: it is used only for the same agent and
// model, and then refreshed like a cached snapshot (the files whose index state moved since
// are read again from the database); anything wrong with it (truncated, corrupt, another
// format version, another agent) means it is ignored and removed, and the agent is read
// from the database.

// snapMagic starts every snapshot file; its last byte is the format version (change it
// whenever the encoding changes: an older file is then ignored).
const snapMagic = "MATESNP\x01"

// snapshotFiles keeps snapshots of agents with at least minChunks chunks in dir, one file
// per agent, written whole to a temporary file and renamed.
type snapshotFiles struct {
	dir       string
	minChunks int
	mu        sync.Mutex
	// forgotten counts removals per agent: a write that started before one is not renamed
	// into place (an erasure must not be undone by a write in flight).
	forgotten map[int64]uint64
}

func (p *snapshotFiles) path(agentID int64) string {
	return filepath.Join(p.dir, "agent-"+strconv.FormatInt(agentID, 10)+".snap")
}

// RemoveSnapshot deletes the agent's snapshot file in dir, if any (what an erasure does in a
// process without a searcher; a searcher's Forget does it for its own).
func RemoveSnapshot(dir string, agentID int64) error {
	if dir == "" {
		return nil
	}
	p := &snapshotFiles{dir: dir}
	if err := os.Remove(p.path(agentID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the recall snapshot of agent %d: %w", agentID, err)
	}
	return nil
}

// remove deletes the agent's file, and keeps a write in flight from putting one back.
func (p *snapshotFiles) remove(agentID int64) error {
	_, _, err := p.removeAfter(agentID, 0)
	return err
}

// removeAfter is remove, and reports whether no other removal came after epoch (then a
// snapshot read since epoch may be written under the new count, which it returns).
func (p *snapshotFiles) removeAfter(agentID int64, epoch uint64) (uint64, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	alone := p.forgotten[agentID] == epoch
	p.forgotten[agentID]++
	return p.forgotten[agentID], alone, RemoveSnapshot(p.dir, agentID)
}

// exists reports whether the agent has a file.
func (p *snapshotFiles) exists(agentID int64) bool {
	_, err := os.Stat(p.path(agentID))
	return err == nil
}

// epoch is the agent's removal count, to hand to save.
func (p *snapshotFiles) epoch(agentID int64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forgotten[agentID]
}

// save writes snap (one segment, chunks numbered in it in order) unless the agent's file was
// removed since epoch.
func (p *snapshotFiles) save(snap *snapshot, epoch uint64) error {
	b, ok := encodeSnapshot(snap)
	if !ok {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("create the recall snapshot directory: %w", err)
	}
	f, err := os.CreateTemp(p.dir, "agent-*.tmp")
	if err != nil {
		return fmt.Errorf("write the recall snapshot of agent %d: %w", snap.agentID, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename; removed if anything failed
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the recall snapshot of agent %d: %w", snap.agentID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.forgotten[snap.agentID] != epoch {
		return nil
	}
	if err := os.Rename(tmp, p.path(snap.agentID)); err != nil {
		return fmt.Errorf("write the recall snapshot of agent %d: %w", snap.agentID, err)
	}
	return nil
}

// load reads the agent's file for model; nil when there is none or it is not usable (then
// it is removed).
func (p *snapshotFiles) load(agentID int64, model string) (*snapshot, error) {
	fields, strs, err := readSnapshotFile(p.path(agentID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var snap *snapshot
	if err == nil {
		snap, err = decodeFields(fields, strs, agentID, model)
	}
	if err != nil {
		_ = p.remove(agentID)
		return nil, fmt.Errorf("recall snapshot of agent %d ignored (read from the database instead): %w", agentID, err)
	}
	return snap, nil
}

// encodeSnapshot is the file's bytes: the header, the fields, the strings (seal). ok is
// false when the snapshot is not one segment numbered in chunk order (not compacted).
func encodeSnapshot(snap *snapshot) ([]byte, bool) {
	if snap.bm25.Segments() != 1 || snap.bm25.Held() != len(snap.chunks) {
		return nil, false
	}
	var sg *lexical.Segment
	for k := range snap.chunks {
		d := snap.chunks[k].doc
		if sg == nil {
			sg = d.Seg
		}
		if d.Seg != sg || d.N != uint32(k) {
			return nil, false
		}
	}
	b := make([]byte, snapHeader, snap.bytes+1024)
	b = binary.AppendVarint(b, snap.agentID)
	b = binary.AppendVarint(b, snap.generation)
	b = appendString(b, snap.model)
	b = binary.AppendUvarint(b, uint64(len(snap.files)))
	for _, name := range slices.Sorted(maps.Keys(snap.files)) {
		st := snap.files[name]
		b = appendString(b, name)
		b = binary.AppendVarint(b, st.fileID)
		b = binary.AppendVarint(b, st.version)
		b = appendBool(b, st.pending)
		b = binary.AppendVarint(b, int64(st.format))
	}
	floats, blob := 0, 0
	for k := range snap.chunks {
		c := &snap.chunks[k]
		floats += len(c.vec)
		blob += len(c.heading) + len(c.text) + len(c.terms) + len(c.hash)
		if k == 0 || c.filename != snap.chunks[k-1].filename {
			blob += len(c.filename)
		}
	}
	// The posting lists before the chunks, with their length: a load decodes both at once.
	seg, _ := sg.AppendBinary(nil)
	b = binary.AppendUvarint(b, uint64(len(seg)))
	b = append(b, seg...)
	b = binary.AppendUvarint(b, uint64(len(snap.chunks)))
	b = binary.AppendUvarint(b, uint64(floats))
	// The chunks' strings go in one run at the end of the file (a loaded snapshot's strings
	// are slices of one string read from it, which holds nothing else); the chunks' fields
	// hold their lengths.
	strs := make([]byte, 0, blob)
	prev := ""
	for k := range snap.chunks {
		c := &snap.chunks[k]
		if c.filename != prev {
			strs = append(strs, c.filename...)
		}
		prev = c.filename
		strs = append(append(append(append(strs, c.heading...), c.text...), c.terms...), c.hash...)
	}
	prev = ""
	for k := range snap.chunks {
		c := &snap.chunks[k]
		// A file's name once, for its first chunk.
		b = appendBool(b, c.filename == prev)
		if c.filename != prev {
			b = binary.AppendUvarint(b, uint64(len(c.filename)))
			prev = c.filename
		}
		b = binary.AppendVarint(b, int64(c.ordinal))
		b = binary.AppendVarint(b, int64(c.startLine))
		b = binary.AppendVarint(b, int64(c.end))
		b = binary.AppendUvarint(b, uint64(len(c.heading)))
		b = binary.AppendUvarint(b, uint64(len(c.text)))
		b = binary.AppendUvarint(b, uint64(len(c.terms)))
		b = binary.AppendVarint(b, c.fileVersion)
		b = binary.AppendUvarint(b, uint64(len(c.hash)))
		b = binary.AppendVarint(b, c.date.Unix())
		b = binary.AppendVarint(b, int64(c.date.Nanosecond()))
		b = appendBool(b, c.dated)
		b = binary.AppendUvarint(b, uint64(len(c.vec)))
		for _, f := range c.vec {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return seal(b, strs), true
}

// snapHeader is the file's header: magic, the lengths of the fields and of the strings, the
// CRC-32C of both.
const snapHeader = 28

// seal completes b (a header's room, then the fields) with the strings and the header.
func seal(b, strs []byte) []byte {
	copy(b, snapMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(len(b)-snapHeader))
	binary.LittleEndian.PutUint64(b[16:], uint64(len(strs)))
	binary.LittleEndian.PutUint32(b[24:], crc32.Update(crc32.Checksum(b[snapHeader:], castagnoli), castagnoli, strs))
	return append(b, strs...)
}

// readSnapshotFile reads a file seal wrote: the fields as bytes, the strings as one string
// (read straight into it, not copied from a byte slice), checked against the header.
func readSnapshotFile(path string) (fields []byte, strs string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	var h [snapHeader]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:8]) != snapMagic {
		return nil, "", errSnapshotFile
	}
	nf, ns := binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint64(h[16:])
	if size := uint64(st.Size()); nf > size || ns > size || snapHeader+nf+ns != size {
		return nil, "", fmt.Errorf("%w: %d bytes, header says %d + %d", errSnapshotFile, size, nf, ns)
	}
	fields = make([]byte, nf)
	if _, err := io.ReadFull(f, fields); err != nil {
		return nil, "", fmt.Errorf("%w: %v", errSnapshotFile, err)
	}
	sum := crc32.New(castagnoli)
	_, _ = sum.Write(fields)
	var sb strings.Builder
	sb.Grow(int(ns))
	if _, err := io.CopyN(io.MultiWriter(&sb, sum), f, int64(ns)); err != nil {
		return nil, "", fmt.Errorf("%w: %v", errSnapshotFile, err)
	}
	if sum.Sum32() != binary.LittleEndian.Uint32(h[24:]) {
		return nil, "", fmt.Errorf("%w: checksum", errSnapshotFile)
	}
	return fields, sb.String(), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// errSnapshotFile is a snapshot file that is not one this version wrote whole.
var errSnapshotFile = errors.New("not a complete snapshot file of this version")

// decodeSnapshot reads a file's bytes as encodeSnapshot wrote them (tests; load reads the
// file with readSnapshotFile and decodes with decodeFields).
func decodeSnapshot(b []byte, agentID int64, model string) (*snapshot, error) {
	if len(b) < snapHeader || string(b[:8]) != snapMagic {
		return nil, errSnapshotFile
	}
	nf, ns := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	if nf > uint64(len(b)) || ns > uint64(len(b)) || snapHeader+nf+ns != uint64(len(b)) {
		return nil, errSnapshotFile
	}
	fields, strs := b[snapHeader:snapHeader+nf], b[snapHeader+nf:]
	if crc32.Update(crc32.Checksum(fields, castagnoli), castagnoli, strs) != binary.LittleEndian.Uint32(b[24:]) {
		return nil, fmt.Errorf("%w: checksum", errSnapshotFile)
	}
	return decodeFields(fields, string(strs), agentID, model)
}

// decodeFields builds the snapshot of a file's fields and strings, for agentID and model
// only. Any flaw is an error, never a panic.
func decodeFields(body []byte, blob string, agentID int64, model string) (*snapshot, error) {
	d := snapDecoder{b: body}
	if got := d.varint(); got != agentID || d.err != nil {
		return nil, fmt.Errorf("%w: agent %d's file holds agent %d", errSnapshotFile, agentID, got)
	}
	snap := &snapshot{agentID: agentID, generation: d.varint(), fromFile: true}
	if snap.model = string(d.bytes(d.count())); snap.model != model {
		return nil, fmt.Errorf("%w: model %q, want %q", errSnapshotFile, snap.model, model)
	}
	nf := d.count()
	snap.files = make(map[string]fileState, nf)
	for range nf {
		name := string(d.bytes(d.count()))
		snap.files[name] = fileState{fileID: d.varint(), version: d.varint(), pending: d.bool(), format: int(d.varint())}
	}
	type decoded struct {
		sg   *lexical.Segment
		rest []byte
		err  error
	}
	segment := make(chan decoded, 1)
	seg := d.bytes(d.count())
	if d.err != nil {
		return nil, d.err
	}
	go func() {
		sg, rest, err := lexical.DecodeSegment(seg)
		segment <- decoded{sg, rest, err}
	}()
	n, floats := d.count(), d.count()
	if floats > len(body)/4 {
		return nil, fmt.Errorf("%w: %d floats", errSnapshotFile, floats)
	}
	// The chunks' strings are slices of blob (one allocation, not five per chunk); a
	// compaction copies the strings it keeps.
	// str takes the next string of the run, its length read from the fields.
	str := func() string {
		n := d.uvarint()
		if n > uint64(len(blob)) {
			d.fail()
			return ""
		}
		s := blob[:n]
		blob = blob[n:]
		return s
	}
	snap.chunks = make([]cachedChunk, n)
	block := make([]float32, floats)
	name := ""
	for k := range snap.chunks {
		if !d.bool() {
			name = str()
		}
		c := &snap.chunks[k]
		c.filename = name
		c.ordinal, c.startLine, c.end = int(d.varint()), int(d.varint()), int(d.varint())
		c.heading = str()
		c.text = str()
		c.terms = str()
		c.fileVersion = d.varint()
		c.hash = str()
		sec, nsec := d.varint(), d.varint()
		c.date = time.Unix(sec, nsec).UTC()
		c.dated = d.bool()
		if dims := d.count(); dims > 0 {
			if dims > len(block) || dims*4 > len(d.b) {
				return nil, fmt.Errorf("%w: vector of %d", errSnapshotFile, dims)
			}
			c.vec = block[:dims:dims]
			block = block[dims:]
			for i := range c.vec {
				c.vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.b[4*i:]))
			}
			d.skip(4 * dims)
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if len(blob) != 0 {
		return nil, fmt.Errorf("%w: strings left over", errSnapshotFile)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: bytes after the chunks", errSnapshotFile)
	}
	dec := <-segment
	sg := dec.sg
	if dec.err != nil || len(dec.rest) != 0 || sg.Len() != n {
		return nil, fmt.Errorf("%w: posting lists", errSnapshotFile)
	}
	for k := 1; k < n; k++ {
		if compareChunks(&snap.chunks[k-1], &snap.chunks[k]) >= 0 {
			return nil, fmt.Errorf("%w: chunks out of order", errSnapshotFile)
		}
	}
	for k := range snap.chunks {
		snap.chunks[k].doc = lexical.Doc{Seg: sg, N: uint32(k)}
	}
	snap.assemble()
	return snap, nil
}

// snapDecoder reads a snapshot body, remembering the first error.
type snapDecoder struct {
	b   []byte
	err error
}

func (d *snapDecoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or malformed", errSnapshotFile)
	}
}

func (d *snapDecoder) skip(n int) {
	if d.err != nil || n > len(d.b) {
		d.fail()
		return
	}
	d.b = d.b[n:]
}

func (d *snapDecoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.fail()
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *snapDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.skip(n)
	return v
}

func (d *snapDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.skip(n)
	return v
}

// count reads a number of items that follow, each taking a byte or more.
func (d *snapDecoder) count() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	d.skip(n)
	return int(v)
}

func (d *snapDecoder) bool() bool {
	if d.err != nil || len(d.b) == 0 || d.b[0] > 1 {
		d.fail()
		return false
	}
	v := d.b[0] == 1
	d.skip(1)
	return v
}

// sweep removes leftover temporary files and the files of agents erased (erased reports
// which of the agents are).
func (p *snapshotFiles) sweep(erased func(ids []int64) (map[int64]bool, error)) error {
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the recall snapshots: %w", err)
	}
	var ids []int64
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(p.dir, name))
			continue
		}
		if id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(name, "agent-"), ".snap"), 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	gone, err := erased(ids)
	if err != nil {
		return err
	}
	for id := range gone {
		if err := p.remove(id); err != nil {
			return err
		}
	}
	return nil
}
