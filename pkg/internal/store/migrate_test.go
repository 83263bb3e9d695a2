package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

func TestMigrations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		// storetest migrated once; more runs, concurrent ones included, change nothing.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := store.Migrate(ctx, db.DB); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("re-run migration: %v", err)
		}
		st, err := store.Status(ctx, db.DB)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != len(store.Migrations()) {
			t.Fatalf("status lists %d migrations, want %d", len(st), len(store.Migrations()))
		}
		for i, s := range st {
			if s.AppliedAt == nil || s.Version != store.Migrations()[i].Version {
				t.Errorf("migration %d (%s) not applied", s.Version, s.Name)
			}
		}
		var rows int64
		db.DB.Table("mate_schema_migration").Count(&rows)
		if rows != int64(len(store.Migrations())) {
			t.Errorf("%d rows in mate_schema_migration, want one per migration", rows)
		}
		for _, m := range []any{&store.WorkspaceFile{}, &store.WorkspaceFileHistory{}, &store.Agent{}, &store.Message{},
			&store.CronJob{}, &store.MemoryRun{}, &store.ExtractionWatermark{}, &store.AppliedEffect{}, &store.AgentFence{}} {
			if !db.DB.Migrator().HasTable(m) {
				t.Errorf("table for %T missing", m)
			}
		}
		if db.Driver == "mysql" {
			// The test database defaults to a case-insensitive collation on purpose.
			var coll string
			db.DB.Raw("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'mate_workspace_file' AND COLUMN_NAME = 'filename'").Scan(&coll)
			if coll != "utf8mb4_bin" {
				t.Errorf("mate_workspace_file.filename collation %q, want utf8mb4_bin", coll)
			}
		}
	})
}

func TestOpenRefusesUnknownDriver(t *testing.T) {
	if _, err := store.Open("postgres", "", t.TempDir()); err == nil {
		t.Fatal("unknown driver accepted")
	}
}
