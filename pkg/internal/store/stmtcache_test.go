package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	moderncsqlite "modernc.org/sqlite"
)

// countingConnector counts the statements the driver prepares.
type countingConnector struct {
	driver.Connector
	prepares *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{conn.(driverConn), c.prepares}, nil
}

type countingConn struct {
	driverConn
	prepares *atomic.Int64
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.prepares.Add(1)
	return c.driverConn.PrepareContext(ctx, query)
}

func openCounting(t *testing.T) (*sql.DB, *atomic.Int64) {
	t.Helper()
	dsn, err := sqliteDSN("file:"+filepath.Join(t.TempDir(), "t.db"), "full")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := moderncsqlite.NewConnector(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	db := sql.OpenDB(cachingConnector{countingConnector{inner, &n}})
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db, &n
}

// A statement run again on the same connection is not prepared again (issue 14).
func TestStatementCacheReusesPreparedStatements(t *testing.T) {
	db, prepares := openCounting(t)
	before := prepares.Load()
	for i := range 100 {
		if _, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := db.QueryRow("SELECT v FROM kv WHERE k = ?", i).Scan(&v); err != nil || v != fmt.Sprint("v", i) {
			t.Fatalf("row %d: %q, %v", i, v, err)
		}
	}
	if got := prepares.Load() - before; got != 2 {
		t.Fatalf("%d prepares for 2 statement texts run 100 times each", got)
	}
}

// The same text used again while its rows are open (a query inside a row loop) runs on a
// statement of its own, and a cached statement sees later commits (it holds no snapshot).
func TestStatementCacheNestedUseAndFreshReads(t *testing.T) {
	db, _ := openCounting(t)
	db.SetMaxOpenConns(2)
	for i := range 3 {
		if _, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", i, "a"); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const q = "SELECT k FROM kv WHERE k >= ? ORDER BY k"
	rows, err := conn.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var outer []int
	for rows.Next() {
		var k int
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, k)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(outer) != 3 {
		t.Fatalf("outer rows %v", outer)
	}
	// nested: the same text while the first rows are still open, on the same connection
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := tx.Query(q, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r1.Next() {
		var k, inner int
		if err := r1.Scan(&k); err != nil {
			t.Fatal(err)
		}
		r2, err := tx.Query(q, k)
		if err != nil {
			t.Fatal(err)
		}
		for r2.Next() {
			inner++
		}
		if err := r2.Close(); err != nil {
			t.Fatal(err)
		}
		if inner != 3-k {
			t.Fatalf("nested query from %d saw %d rows, want %d", k, inner, 3-k)
		}
		n++
	}
	if err := r1.Close(); err != nil || n != 3 {
		t.Fatalf("outer loop %d rows, %v", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// a commit from another connection is seen by the cached statement on this one
	var v string
	if err := conn.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = ?", 1).Scan(&v); err != nil || v != "a" {
		t.Fatalf("%q, %v", v, err)
	}
	if _, err := db.Exec("UPDATE kv SET v = ? WHERE k = ?", "b", 1); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = ?", 1).Scan(&v); err != nil || v != "b" {
		t.Fatalf("after another connection's commit: %q, %v", v, err)
	}
}

// More distinct texts than the cache holds: the least recently used are closed, results
// stay right, and the cache does not grow past its size.
func TestStatementCacheEvicts(t *testing.T) {
	db, _ := openCounting(t)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range stmtCacheSize * 2 {
		var got int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT %d + ?", i), 1).Scan(&got); err != nil || got != i+1 {
			t.Fatalf("%d: %d, %v", i, got, err)
		}
	}
	err = conn.Raw(func(dc any) error {
		c := dc.(*cachingConn)
		if c.lru.Len() != stmtCacheSize || len(c.byQuery) != stmtCacheSize {
			return fmt.Errorf("cache holds %d (%d), want %d", c.lru.Len(), len(c.byQuery), stmtCacheSize)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
