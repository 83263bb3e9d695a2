package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

func TestMySQLConfigSetsDriverTimeouts(t *testing.T) {
	cfg, err := store.MySQLConfig("u:p@tcp(db:3306)/mate")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != store.MySQLDialTimeout || cfg.ReadTimeout != store.MySQLReadTimeout || cfg.WriteTimeout != store.MySQLWriteTimeout {
		t.Fatalf("timeouts: dial %s read %s write %s", cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout)
	}
	cfg, err = store.MySQLConfig("u:p@tcp(db:3306)/mate?readTimeout=5s&writeTimeout=6s&timeout=7s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReadTimeout != 5*time.Second || cfg.WriteTimeout != 6*time.Second || cfg.Timeout != 7*time.Second {
		t.Fatalf("the DSN's own timeouts were replaced: %+v", cfg)
	}
}

// Issue 9 point 14: a connection that stops answering (no reset) fails a statement at its
// deadline, even one made without a context deadline, and the watch reports the stall
// while it lasts.
func TestStalledConnectionFailsAtTheDeadline(t *testing.T) {
	db, ok := storetest.MySQL(t)
	if !ok {
		t.Skip("MATE_TEST_MYSQL_DSN not set")
	}
	gdb, proxy := storetest.Via(t, db, store.WithStatementTimeout(time.Second))
	if err := gdb.Exec("SELECT 1").Error; err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		var n int64
		done <- gdb.WithContext(context.Background()).Model(&store.Agent{}).Count(&n).Error
	}()
	// While the statement waits (until its 1 s deadline), the watch must report it stuck
	// once it has run 200 ms: poll for that, and fail if the statement ends unreported.
	var err error
	reported := false
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(10 * time.Second)
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			reported = reported || store.WatchOf(gdb).Stalled(200*time.Millisecond) != nil
		case <-timeout:
			t.Fatal("a statement on a frozen connection is still waiting after 10s")
		}
	}
	if !reported {
		t.Error("the watch did not report the statement stuck on the frozen connection while it waited")
	}
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("statement on a frozen connection: %v after %s", err, time.Since(start))
	}
	proxy.Thaw()
	if err := store.WatchOf(gdb).Stalled(200 * time.Millisecond); err != nil {
		t.Errorf("stall still reported after the statement failed: %v", err)
	}
	if err := gdb.Exec("SELECT 1").Error; err != nil {
		t.Fatalf("after the thaw: %v", err)
	}
}

// The statement deadline is per statement: several operations on one statement (batches
// inside a transaction) each get their own, never the previous one's cancelled context.
func TestStatementDeadlineDoesNotLeakAcrossBatches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		rows := make([]store.Message, 1200)
		for i := range rows {
			rows[i] = store.Message{AgentID: 1, ConversationID: "c", Role: "user", Content: "m", CreateTime: time.Now().UTC()}
		}
		if err := db.DB.Transaction(func(tx *gorm.DB) error { return tx.CreateInBatches(&rows, 100).Error }); err != nil {
			t.Fatalf("batches in a transaction: %v", err)
		}
		var n int64
		if err := db.DB.Model(&store.Message{}).Count(&n).Error; err != nil || n != 1200 {
			t.Fatalf("%d rows: %v", n, err)
		}
		if d := store.WatchOf(db.DB).Oldest(); d != 0 {
			t.Fatalf("statements left in flight: oldest %s", d)
		}
	})
}
