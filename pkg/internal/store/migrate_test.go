package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

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

// Migration 6 adds the recall index format to a database of migration 5, whose rows read as
// format 0 (indexed before the format was recorded).
func TestRecallFormatMigrationUpgrades(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		m := db.DB.Migrator()
		if err := m.DropIndex(&store.RecallFile{}, "Format"); err != nil {
			t.Fatal(err)
		}
		if err := m.DropColumn(&store.RecallFile{}, "Format"); err != nil {
			t.Fatal(err)
		}
		if err := db.DB.Exec("DELETE FROM mate_schema_migration WHERE version = 6").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.DB.Exec("INSERT INTO mate_recall_file (agent_id, filename, file_id, version, chunks, embed_pending, index_time) VALUES (1, 'MEMORY.md', 1, 1, 1, false, ?)", time.Now()).Error; err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
		if !m.HasColumn(&store.RecallFile{}, "Format") || !m.HasIndex(&store.RecallFile{}, "Format") {
			t.Fatal("migration 6 did not add the format column and its index")
		}
		var f store.RecallFile
		if err := db.DB.Where("agent_id = 1").Take(&f).Error; err != nil || f.Format != 0 {
			t.Fatalf("a row of migration 5 reads format %d (%v), want 0", f.Format, err)
		}
	})
}

// Migration 7 adds the token count columns to a database of migration 6: its files read
// as not counted (token version 0), to be counted when first read.
func TestTokenCountMigrationUpgrades(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		m := db.DB.Migrator()
		for _, field := range []string{"TokenCount", "TokenEncoding", "TokenVersion"} {
			if err := m.DropColumn(&store.WorkspaceFile{}, field); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.DB.Exec("DELETE FROM mate_schema_migration WHERE version = 7").Error; err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		if err := db.DB.Exec("INSERT INTO mate_workspace_file (agent_id, filename, content, file_size, enabled, sort_order, version, create_time, update_time, deleted) "+
			"VALUES (1, 'MEMORY.md', 'x', 1, true, 0, 3, ?, ?, 0)", now, now).Error; err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
		var f store.WorkspaceFile
		if err := db.DB.Where("agent_id = 1").Take(&f).Error; err != nil {
			t.Fatal(err)
		}
		if f.TokenVersion != 0 || f.TokenCount != 0 || f.TokenEncoding != "" {
			t.Fatalf("a file of migration 6 reads count %d, encoding %q, version %d; want none", f.TokenCount, f.TokenEncoding, f.TokenVersion)
		}
		// A row written as a process without the columns writes it still gets their defaults.
		if err := db.DB.Exec("INSERT INTO mate_workspace_file (agent_id, filename, content, file_size, enabled, sort_order, version, create_time, update_time, deleted) "+
			"VALUES (1, 'PROFILE.md', 'y', 1, true, 1, 1, ?, ?, 0)", now, now).Error; err != nil {
			t.Fatal(err)
		}
	})
}
