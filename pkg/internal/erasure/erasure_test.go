package erasure_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/erasure"
	"github.com/matememory/matememory/pkg/internal/fence"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// write stores an agent with a file (two versions, the first in history) and a conversation
// of two messages, each holding canary.
func write(t *testing.T, db *gorm.DB, agent int64, canary string) {
	t.Helper()
	now := time.Now().UTC()
	rows := []any{
		&store.Agent{ID: agent, Language: "en", Timezone: "UTC", CreateTime: now},
		&store.WorkspaceFile{AgentID: agent, Filename: "notes.md", Content: "- " + canary + "-file v2", FileSize: 1, Version: 2, Enabled: true, CreateTime: now, UpdateTime: now},
		&store.WorkspaceFileHistory{FileID: agent, AgentID: agent, Filename: "notes.md", Version: 1, Content: "- " + canary + "-file v1", Action: "write", Actor: "tool", CreateTime: now},
		&store.Message{AgentID: agent, ConversationID: "c1", Role: "user", Content: "my word is " + canary + "-message", CreateTime: now},
		&store.Message{AgentID: agent, ConversationID: "c2", Role: "user", Content: "and " + canary + "-other", CreateTime: now},
	}
	for _, r := range rows {
		if err := db.Create(r).Error; err != nil {
			t.Fatal(err)
		}
	}
}

func count(t *testing.T, db *gorm.DB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(sql, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestEraseAgentDeletesItsRowsOnly: every row of the agent goes, the other agent's stay, the
// tombstone holds the receipt, the in-process hooks are called once the rows are gone, and a
// second erasure finds nothing more.
func TestEraseAgentDeletesItsRowsOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		write(t, db.DB, 1, "canaryone")
		write(t, db.DB, 2, "canarytwo")
		var forgot, searched []int64
		svc := erasure.New(erasure.Deps{DB: db.DB, Log: quiet(),
			Forget: func(id int64) {
				forgot = append(forgot, id)
				if n := count(t, db.DB, "SELECT COUNT(*) FROM mate_agent WHERE id = ?", id); n != 0 {
					t.Errorf("Forget called while agent %d's row is still there", id)
				}
			},
			ForgetSearch:  func(id int64) error { searched = append(searched, id); return nil },
			CloseSessions: func(int64) int { return 3 }})
		r, err := svc.EraseAgent(ctx, 1, "test")
		if err != nil {
			t.Fatal(err)
		}
		if r.Rows["mate_workspace_file"] != 1 || r.Rows["mate_workspace_file_history"] != 1 || r.Rows["mate_message"] != 2 || r.Rows["mate_agent"] != 1 || r.MCPSessions != 3 {
			t.Fatalf("receipt %+v", r)
		}
		if len(forgot) != 1 || forgot[0] != 1 || len(searched) != 1 || searched[0] != 1 {
			t.Fatalf("hooks: forget %v, search %v", forgot, searched)
		}
		for _, table := range []string{"mate_workspace_file", "mate_workspace_file_history", "mate_message"} {
			if n := count(t, db.DB, "SELECT COUNT(*) FROM "+table+" WHERE agent_id = 1"); n != 0 {
				t.Errorf("%s: %d rows of the erased agent", table, n)
			}
			if n := count(t, db.DB, "SELECT COUNT(*) FROM "+table+" WHERE agent_id = 2"); n == 0 {
				t.Errorf("%s: the other agent's rows are gone", table)
			}
		}
		at, ok, err := store.ErasedAt(ctx, db.DB, 1)
		if err != nil || !ok || at.IsZero() {
			t.Fatalf("tombstone: %v %v %v", at, ok, err)
		}
		if err := store.CheckNotErasedSince(ctx, db.DB, 1, at.Add(-time.Second)); !errors.Is(err, store.ErrErased) {
			t.Errorf("an event before the erasure: %v, want ErrErased", err)
		}
		if err := store.CheckNotErasedSince(ctx, db.DB, 1, at.Add(time.Second)); err != nil {
			t.Errorf("an event after the erasure: %v", err)
		}
		again, err := svc.EraseAgent(ctx, 1, "test")
		if err != nil {
			t.Fatal(err)
		}
		for table, n := range again.Rows {
			if n != 0 {
				t.Errorf("the second erasure deleted %d rows of %s", n, table)
			}
		}
		if n := count(t, db.DB, "SELECT erasures FROM mate_agent_erasure WHERE agent_id = 1"); n != 2 {
			t.Errorf("erasures %d, want 2", n)
		}
	})
}

// TestErasureNotices: an agent's erasure and a conversation's each publish a notice that a
// listener (another process) receives, without the conversation's id.
func TestErasureNotices(t *testing.T) {
	db := storetest.SQLite(t)
	_, dialer := bustest.Server(t)
	_, js := bustest.Connect(t, dialer, "erasure-test")
	ctx := context.Background()
	write(t, db.DB, 1, "canaryone")
	notices := make(chan erasure.Notice, 4)
	stop, err := erasure.Listen(ctx, js, 1, quiet(), func(n erasure.Notice) { notices <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	svc := erasure.New(erasure.Deps{DB: db.DB, JS: js, Log: quiet()})
	next := func() erasure.Notice {
		t.Helper()
		select {
		case n := <-notices:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no erasure notice within 10 s")
			return erasure.Notice{}
		}
	}
	if _, err := svc.EraseConversation(ctx, 1, "c1", "test"); err != nil {
		t.Fatal(err)
	}
	if n := next(); n.AgentID != 1 || n.Scope != erasure.ScopeConversation || n.ErasedAt.IsZero() {
		t.Fatalf("conversation notice %+v", n)
	}
	if _, err := svc.EraseAgent(ctx, 1, "test"); err != nil {
		t.Fatal(err)
	}
	if n := next(); n.AgentID != 1 || n.Scope != erasure.ScopeAgent {
		t.Fatalf("agent notice %+v", n)
	}
	st, err := js.Stream(ctx, bus.StreamErasures)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(m.Data, []byte("c1")) || bytes.Contains(m.Data, []byte("canary")) {
			t.Errorf("notice %d holds an id or content: %s", seq, m.Data)
		}
	}
}

// canaries counts canary in the database file and its WAL.
func canaries(t *testing.T, path, canary string) int {
	t.Helper()
	n := 0
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte(canary))
	}
	return n
}

// TestEraseVacuumsADatabaseWrittenBeforeSecureDelete: a database written while secure_delete
// was off (by an earlier version) holds a changed file's older bytes in free space, out of
// reach of the erasure's deletes: the erasure's VACUUM removes them.
func TestEraseVacuumsADatabaseWrittenBeforeSecureDelete(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "matememory.db")
	old, err := store.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=secure_delete(0)&_pragma=busy_timeout(10000)", dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, old); err != nil {
		t.Fatal(err)
	}
	write(t, old, 1, "canaryone")
	write(t, old, 2, "canarytwo")
	// The file's content grows (its row moves) and a message is deleted: their older bytes
	// stay in the pages' free space.
	if err := old.Exec("UPDATE mate_workspace_file SET content = ? WHERE agent_id = 1", strings.Repeat("rewritten, longer ", 20)).Error; err != nil {
		t.Fatal(err)
	}
	if err := old.Exec("DELETE FROM mate_message WHERE agent_id = 1 AND conversation_id = 'c2'").Error; err != nil {
		t.Fatal(err)
	}
	if err := old.Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
		t.Fatal(err)
	}
	if err := store.Close(old); err != nil {
		t.Fatal(err)
	}
	if canaries(t, path, "canaryone-file v2") == 0 || canaries(t, path, "canaryone-other") == 0 {
		t.Fatal("the database written without secure_delete keeps no freed bytes: the test cannot see what VACUUM removes")
	}

	db, err := store.Open("sqlite", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := erasure.New(erasure.Deps{DB: db, Log: quiet()}).EraseAgent(ctx, 1, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Vacuumed {
		t.Errorf("receipt %+v: not vacuumed", r)
	}
	if n := canaries(t, path, "canaryone"); n != 0 {
		t.Errorf("%d copies of the erased agent's canary stay in the database file or its WAL", n)
	}
	if canaries(t, path, "canarytwo-message") == 0 {
		t.Error("the other agent's message is gone")
	}
	if err := store.Close(db); err != nil {
		t.Fatal(err)
	}
}

// TestErasureFencesOutAnEarlierLease: a worker that held the agent's lease before the
// erasure (it ran out while the erasure waited, and the worker does not know yet) cannot
// write after the erasure, of the agent or of the conversation erased; a lease taken after
// the erasure can.
func TestErasureFencesOutAnEarlierLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		_, dialer := bustest.Server(t)
		_, js := bustest.Connect(t, dialer, "erasure-test")
		leases, err := lease.Bucket(ctx, js, bus.BucketLease, 30*time.Second, 1, "test")
		if err != nil {
			t.Fatal(err)
		}
		svc := erasure.New(erasure.Deps{DB: db.DB, JS: js, Leases: leases, Log: quiet()})
		check := func(agent int64, tok fence.Token) error {
			return db.DB.Transaction(func(tx *gorm.DB) error { return fence.Check(store.InTx(tx), agent, tok, time.Now().UTC()) })
		}
		// before takes the agent's lease and writes under it; its lease then goes (released
		// here, as one that ran out), and its token is what the worker still carries.
		before := func(agent int64) fence.Token {
			t.Helper()
			l, err := leases.Acquire(ctx, agent, "summarize")
			if err != nil {
				t.Fatal(err)
			}
			tok := fence.TokenOf(l)
			if err := check(agent, tok); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return tok
		}
		after := func(agent int64) {
			t.Helper()
			l, err := leases.Acquire(ctx, agent, "summarize")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Release(ctx) }()
			if err := check(agent, fence.TokenOf(l)); err != nil {
				t.Errorf("a lease taken after the erasure of agent %d: %v", agent, err)
			}
		}

		write(t, db.DB, 1, "canaryone")
		stale := before(1)
		if _, err := svc.EraseAgent(ctx, 1, "test"); err != nil {
			t.Fatal(err)
		}
		if err := check(1, stale); !errors.Is(err, fence.ErrFenced) {
			t.Errorf("a lease from before the agent's erasure wrote: %v, want ErrFenced", err)
		}
		after(1)

		write(t, db.DB, 2, "canarytwo")
		stale = before(2)
		if _, err := svc.EraseConversation(ctx, 2, "c1", "test"); err != nil {
			t.Fatal(err)
		}
		if err := check(2, stale); !errors.Is(err, fence.ErrFenced) {
			t.Errorf("a lease from before the conversation's erasure wrote: %v, want ErrFenced", err)
		}
		after(2)
	})
}
