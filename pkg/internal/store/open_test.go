package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
)

func TestMySQLConfigInterpolatesParams(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"u:p@tcp(db:3306)/mate", true},
		{"u:p@tcp(db:3306)/mate?charset=utf8mb4", true},
		{"u:p@tcp(db:3306)/mate?interpolateParams=false", false}, // the user's choice stays
		{"u:p@tcp(db:3306)/mate?charset=gbk", false},             // escaping unsafe there
	} {
		cfg, err := store.MySQLConfig(tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.InterpolateParams != tc.want {
			t.Errorf("%s: interpolateParams %v, want %v", tc.dsn, cfg.InterpolateParams, tc.want)
		}
	}
}

// SQLite commits are as durable as the embedded NATS server's writes unless the user opts
// out, on every connection of the pool.
func TestSQLiteSynchronous(t *testing.T) {
	for _, tc := range []struct {
		opts []store.Option
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{nil, 2},
		{[]store.Option{store.WithSQLiteSynchronous("full")}, 2},
		{[]store.Option{store.WithSQLiteSynchronous("normal")}, 1},
	} {
		db, err := store.Open("sqlite", "", t.TempDir(), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		// several connections at once, so the pragma is seen on more than the first
		conns := make([]*sql.Conn, 0, 3)
		for range 3 {
			c, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			var got int
			if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("synchronous %d, want %d", got, tc.want)
			}
			var mode string
			if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode %q (%v), want wal", mode, err)
			}
			_ = c.Close()
		}
		_ = store.Close(db)
	}
	if _, err := store.Open("sqlite", "", t.TempDir(), store.WithSQLiteSynchronous("off")); err == nil {
		t.Fatal("synchronous off accepted")
	}
}

// Times keep the text format earlier versions wrote (glebarez's), so files written by them
// still compare and sort the same in SQL, and read back as the same instant.
func TestSQLiteTimeFormat(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open("sqlite", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	if err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, at DATETIME)").Error; err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 23, 59, 58, 123456789, time.UTC)
	if err := db.Exec("INSERT INTO t (id, at) VALUES (1, ?)", at).Error; err != nil {
		t.Fatal(err)
	}
	var text string
	if err := db.Raw("SELECT '<' || at || '>' FROM t").Scan(&text).Error; err != nil {
		t.Fatal(err)
	}
	if want := "<2026-11-30 23:59:58.123456789+00:00>"; text != want {
		t.Fatalf("stored %q, want %q", text, want)
	}
	var back time.Time
	if err := db.Raw("SELECT at FROM t").Scan(&back).Error; err != nil {
		t.Fatal(err)
	}
	if !back.Equal(at) {
		t.Fatalf("read back %s, want %s", back, at)
	}
}

// The database holds every agent's memory: the data folder Open creates is its owner's
// only (0700), and so are the database and its -wal and -shm files (0600), whatever the
// umask; a database an earlier version left 0644 is narrowed when it is opened.
func TestSQLiteFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db, err := store.Open("sqlite", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE t (x TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO t VALUES ('secret')").Error; err != nil {
		t.Fatal(err)
	}
	wantMode(t, dir, 0o700)
	path := filepath.Join(dir, "matememory.db")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		wantMode(t, p, 0o600)
	}
	_ = store.Close(db)

	for _, p := range []string{path, path + "-wal"} {
		if err := os.Chmod(p, 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	db, err = store.Open("sqlite", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	wantMode(t, path, 0o600)
	if st, err := os.Stat(path + "-wal"); err == nil && st.Mode().Perm() != 0o600 {
		t.Fatalf("%s-wal is %v after reopening, want 0600", path, st.Mode().Perm())
	}
}

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Fatalf("%s is %v, want %v", path, got, want)
	}
}

// A deleted row's bytes leave the SQLite file at once, on every connection of the pool
// (secure_delete): an erasure's deletes reach the disk even if its VACUUM never runs (the
// process stopped in between, the checkpoint kept busy), and so does every other delete.
func TestSQLiteDeletesOverwriteTheirBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open("sqlite", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close(db) }()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "matememory.db")
	inFile := func(canary string) int {
		if err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
			t.Fatal(err)
		}
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
	// Several connections at once, each deleting its own row.
	conns := make([]*sql.Conn, 0, 3)
	for range 3 {
		c, err := sqlDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	now := time.Now().UTC()
	for i, c := range conns {
		canary := fmt.Sprintf("canary-deleted-%d", i)
		if _, err := c.ExecContext(ctx, "INSERT INTO mate_message (agent_id, conversation_id, role, content, create_time) VALUES (?, 'c', 'user', ?, ?)", 1, canary, now); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "INSERT INTO mate_message (agent_id, conversation_id, role, content, create_time) VALUES (?, 'c', 'user', ?, ?)", 2, "canary-kept", now); err != nil {
			t.Fatal(err)
		}
		if inFile(canary) == 0 {
			t.Fatal("the row's bytes are not in the file: the test cannot see them go")
		}
		if _, err := c.ExecContext(ctx, "DELETE FROM mate_message WHERE content = ?", canary); err != nil {
			t.Fatal(err)
		}
		if n := inFile(canary); n != 0 {
			t.Errorf("connection %d: %d copies of a deleted row's bytes stay in the database file", i, n)
		}
	}
	if inFile("canary-kept") == 0 {
		t.Error("the rows not deleted are gone")
	}
}
