package store_test

import (
	"context"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// On MariaDB the pool keeps what it opens: 1,000 events, each a few transactions at once,
// run on at most the pool's size of server connections (as the server tells them:
// CONNECTION_ID()), and the pool closes none of them. With database/sql's default of 2 idle
// connections each event closed what it had opened and the next one dialled again.
func TestPoolKeepsConnections(t *testing.T) {
	t.Run("mysql", func(t *testing.T) {
		db, ok := storetest.MySQL(t)
		if !ok {
			t.Skip("MATE_TEST_MYSQL_DSN not set")
		}
		ctx := context.Background()
		if err := db.DB.Exec("CREATE TABLE pool_probe (id BIGINT AUTO_INCREMENT PRIMARY KEY, conn BIGINT NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		sqlDB, err := db.DB.DB()
		if err != nil {
			t.Fatal(err)
		}
		before := sqlDB.Stats()
		// Events come one after another, each handled by a few statements at once (the
		// worker, the indexer, the API): the load that made the pool close and reopen.
		const events, parallel = 1000, 4
		var (
			mu  sync.Mutex
			ids = map[int64]bool{}
		)
		unit := func() error {
			tx, err := sqlDB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			var id int64
			if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO pool_probe (conn) VALUES (?)", id); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			mu.Lock()
			ids[id] = true
			mu.Unlock()
			return nil
		}
		for range events {
			var g errgroup.Group
			for range parallel {
				g.Go(unit)
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		after := sqlDB.Stats()
		var rows int64
		if err := db.DB.Raw("SELECT COUNT(*) FROM pool_probe").Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if rows != events*parallel {
			t.Fatalf("%d rows written, want %d", rows, events*parallel)
		}
		t.Logf("%d server connections for %d events; pool: open %d, max-idle closed %d, idle-time closed %d, lifetime closed %d, waits %d",
			len(ids), events, after.OpenConnections, after.MaxIdleClosed-before.MaxIdleClosed,
			after.MaxIdleTimeClosed-before.MaxIdleTimeClosed, after.MaxLifetimeClosed-before.MaxLifetimeClosed, after.WaitCount-before.WaitCount)
		if len(ids) > store.MySQLMaxOpenConns {
			t.Errorf("%d events ran on %d server connections, want at most the pool's %d", events, len(ids), store.MySQLMaxOpenConns)
		}
		if closed := after.MaxIdleClosed - before.MaxIdleClosed; closed != 0 {
			t.Errorf("the pool closed %d connections for want of idle room, want 0", closed)
		}
		if after.OpenConnections > store.MySQLMaxOpenConns {
			t.Errorf("%d connections open, want at most %d", after.OpenConnections, store.MySQLMaxOpenConns)
		}
	})
}
