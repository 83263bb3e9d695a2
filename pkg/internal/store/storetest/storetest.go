// Package storetest gives tests real databases: a fresh SQLite file always, and a fresh
// MariaDB/MySQL database when MATE_TEST_MYSQL_DSN is set. Under CI=true a missing DSN fails
// the test instead of skipping MySQL silently.
package storetest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
)

// DB is a migrated test database.
type DB struct {
	Name   string
	Driver string
	DSN    string
	DB     *gorm.DB
}

var seq atomic.Int64

// SQLite returns a migrated SQLite database in a temporary directory.
func SQLite(t testing.TB) DB {
	t.Helper()
	dir := t.TempDir()
	// Test databases are temporary files: an fsync per commit (the production default,
	// tested in pkg/internal/store) would only make the suite slower and its timing-bound tests
	// (a few deliveries with a 20 ms backoff) depend on the shared disk. Benchmarks that
	// should pay it as production does run with MATE_TEST_SQLITE_SYNCHRONOUS=full.
	sync := os.Getenv("MATE_TEST_SQLITE_SYNCHRONOUS")
	if sync == "" {
		sync = "normal"
	}
	db, err := store.Open("sqlite", "", dir, store.WithSQLiteSynchronous(sync))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return DB{Name: "sqlite", Driver: "sqlite", DSN: "file:" + dir + "/matememory.db", DB: db}
}

// MySQLDSN is the DSN of the test server, or "" when none is configured.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("MATE_TEST_MYSQL_DSN")
	if dsn == "" && os.Getenv("CI") == "true" {
		t.Fatal("CI=true but MATE_TEST_MYSQL_DSN is not set: the MariaDB tests must run in CI")
	}
	return dsn
}

// MySQL returns a migrated, freshly created MySQL/MariaDB database, or skips when
// MATE_TEST_MYSQL_DSN is unset outside CI. The database is dropped when the test ends.
func MySQL(t testing.TB) (DB, bool) {
	t.Helper()
	dsn := MySQLDSN(t)
	if dsn == "" {
		return DB{}, false
	}
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("MATE_TEST_MYSQL_DSN: %v", err)
	}
	admin, err := store.Open("mysql", dsn, "")
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	// The database gets a common case-insensitive server default on purpose: the migrations
	// must make identifiers byte-compared by themselves.
	name := fmt.Sprintf("mate_t_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, seq.Add(1))
	if err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci").Error; err != nil {
		t.Fatalf("create test database: %v", err)
	}
	cfg.DBName = name
	testDSN := cfg.FormatDSN()
	db, err := store.Open("mysql", testDSN, "")
	if err != nil {
		t.Fatalf("open mysql test database: %v", err)
	}
	t.Cleanup(func() {
		_ = store.Close(db)
		admin.Exec("DROP DATABASE IF EXISTS " + name)
		_ = store.Close(admin)
	})
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("migrate mysql: %v", err)
	}
	return DB{Name: "mysql", Driver: "mysql", DSN: testDSN, DB: db}, true
}

// Each runs fn as a subtest against every available database.
func Each(t *testing.T, fn func(t *testing.T, db DB)) {
	t.Helper()
	for _, name := range []string{"sqlite", "mysql"} {
		t.Run(name, func(t *testing.T) {
			var db DB
			if name == "sqlite" {
				db = SQLite(t)
			} else {
				var ok bool
				if db, ok = MySQL(t); !ok {
					t.Skip("MATE_TEST_MYSQL_DSN not set")
				}
			}
			fn(t, db)
		})
	}
}
