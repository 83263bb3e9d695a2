package bundle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// seedLarge gives agent id n files of about 2 KiB, each with one previous version, in
// batched inserts (the workspace service would take minutes for 10,000 files).
func seedLarge(t testing.TB, db *gorm.DB, id int64, n int) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := db.Create(&store.Agent{ID: id, Language: "en", Timezone: "UTC", CreateTime: now}).Error; err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("- a line of memory that repeats itself, ", 50)
	const batch = 500
	for start := 0; start < n; start += batch {
		files := make([]store.WorkspaceFile, 0, batch)
		for i := start; i < min(start+batch, n); i++ {
			c := fmt.Sprintf("# file %d\n%s", i, body)
			files = append(files, store.WorkspaceFile{AgentID: id, Filename: fmt.Sprintf("memory/f%05d.md", i), Content: c, FileSize: int64(len(c)),
				Enabled: i%2 == 0, SortOrder: i, Version: 2, CreateTime: now, UpdateTime: now})
		}
		if err := db.CreateInBatches(&files, 100).Error; err != nil {
			t.Fatal(err)
		}
		hist := make([]store.WorkspaceFileHistory, len(files))
		for i, f := range files {
			hist[i] = store.WorkspaceFileHistory{FileID: f.ID, AgentID: id, Filename: f.Filename, Version: 1, Content: "# first draft\n" + body,
				Enabled: true, Action: "write", Actor: store.ActorAPI, Ref: "seed", CreateTime: now}
		}
		if err := db.CreateInBatches(&hist, 100).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// peakWriter counts bytes and samples the heap at every write (a buffered 64 KiB chunk of
// the bundle), keeping the highest value seen.
type peakWriter struct {
	n    int64
	peak uint64
	ms   runtime.MemStats
}

func (w *peakWriter) Write(b []byte) (int, error) {
	w.n += int64(len(b))
	runtime.ReadMemStats(&w.ms)
	w.peak = max(w.peak, w.ms.HeapAlloc)
	return len(b), nil
}

// heapGrowth exports agent id and returns the bundle's size and the peak heap above the
// level before it started.
func heapGrowth(t *testing.T, s *Service, id int64) (int64, uint64) {
	t.Helper()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	w := &peakWriter{}
	if _, err := s.Export(context.Background(), w, id, Includes{History: true}); err != nil {
		t.Fatal(err)
	}
	if w.peak < before.HeapAlloc {
		return w.n, 0
	}
	return w.n, w.peak - before.HeapAlloc
}

// TestExportMemoryIsBounded exports an agent of 1,000 and one of 10,000 files (each with a
// previous version): the bundle is ten times larger, the heap is not.
func TestExportMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 11,000 files")
	}
	db := storetest.SQLite(t).DB
	seedLarge(t, db, 1, 1000)
	seedLarge(t, db, 2, 10000)
	s := New(db)
	smallBytes, small := heapGrowth(t, s, 1)
	largeBytes, large := heapGrowth(t, s, 2)
	t.Logf("1,000 files: %d bytes, heap +%d; 10,000 files: %d bytes, heap +%d", smallBytes, small, largeBytes, large)
	if largeBytes < 9*smallBytes {
		t.Fatalf("the large bundle is %d bytes, the small %d: the fixture is wrong", largeBytes, smallBytes)
	}
	// Bounded: the large export's peak heap is within a few pages' worth of the small one's,
	// and far below its bundle (which a bundle built in memory would at least take).
	if large > 2*small+8<<20 || large > uint64(largeBytes)/4 {
		t.Fatalf("exporting 10x the data grew the heap by %d bytes against %d (bundle %d bytes): memory follows the agent's size", large, small, largeBytes)
	}
}

// TestLargeRoundTrip moves an agent of 10,000 files with history and checks the copy is
// equal record by record, and that a second import changes nothing.
func TestLargeRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 files")
	}
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		seedLarge(t, db.DB, 1, 10000)
		dir := t.TempDir()
		s := New(db.DB, WithTempDir(dir))
		b := export(t, s, 1, all)
		rep := importB(t, s, 2, b, ModeEmpty)
		if rep.Created.File != 10000 || rep.Created.History != 10000 || rep.ConflictCount != 0 {
			t.Fatalf("import: %+v", rep)
		}
		sameRecords(t, b, export(t, s, 2, all))
		if again := importB(t, s, 2, b, ModeMerge); again.Changes != 0 || again.Unchanged.File != 10000 {
			t.Fatalf("second import: %d changes, %d files unchanged", again.Changes, again.Unchanged.File)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("the import left its spool behind: %v", left)
		}
	})
}

// BenchmarkExport exports an agent of 10,000 files with history; bytes/op is the bundle.
func BenchmarkExport(b *testing.B) {
	db := storetest.SQLite(b).DB
	seedLarge(b, db, 1, 10000)
	s := New(db)
	var n int64
	for b.Loop() {
		w := &peakWriter{}
		if _, err := s.Export(context.Background(), w, 1, Includes{History: true}); err != nil {
			b.Fatal(err)
		}
		n = w.n
	}
	b.SetBytes(n)
}

// BenchmarkImport imports that agent's bundle into an empty agent.
func BenchmarkImport(b *testing.B) {
	db := storetest.SQLite(b).DB
	seedLarge(b, db, 1, 10000)
	s := New(db)
	var buf bytes.Buffer
	if _, err := s.Export(context.Background(), &buf, 1, Includes{History: true}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	id := int64(100)
	for b.Loop() {
		id++
		if _, err := s.Import(context.Background(), id, bytes.NewReader(buf.Bytes()), ImportOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// An export in progress (its reader stalled mid-bundle) blocks no writer: it reads a
// snapshot, and a write commits meanwhile without showing up in the bundle.
func TestExportBlocksNoWriter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		seedLarge(t, db.DB, 1, 200) // about 900 KB: the export stalls on the pipe after 64 KiB
		s := New(db.DB)
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := s.Export(context.Background(), pw, 1, Includes{History: true})
			pw.CloseWithError(err)
			done <- err
		}()
		head := make([]byte, 1)
		if _, err := io.ReadFull(pr, head); err != nil { // the export has begun
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ws := workspace.New(db.DB)
		if _, _, err := ws.Write(ctx, 1, "memory/late.md", "written during the export", workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
			t.Fatalf("a write during the export: %v", err)
		}
		rest, err := io.ReadAll(pr)
		if err != nil || <-done != nil {
			t.Fatalf("export: %v", err)
		}
		b := append(head, rest...)
		if c := trailer(t, b); c.Counts.File != 200 || bytes.Contains(b, []byte("memory/late.md")) {
			t.Fatalf("the bundle is no snapshot: %d files, late file included: %v", c.Counts.File, bytes.Contains(b, []byte("memory/late.md")))
		}
	})
}
