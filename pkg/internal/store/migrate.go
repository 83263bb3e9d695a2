package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Migration is one versioned, forward-only schema change. Up uses gorm's Migrator so the
// same migration produces the same schema on MySQL/MariaDB and SQLite.
type Migration struct {
	Version int
	Name    string
	Up      func(tx *gorm.DB) error
}

// schemaMigration records applied migrations.
type schemaMigration struct {
	Version   int       `gorm:"primaryKey;autoIncrement:false"`
	Name      string    `gorm:"size:128;not null"`
	AppliedAt time.Time `gorm:"not null"`
}

func (schemaMigration) TableName() string { return "mate_schema_migration" }

// Migrations lists every schema version in order. Append only; never edit a released one.
func Migrations() []Migration {
	return []Migration{
		{Version: 1, Name: "initial schema", Up: func(tx *gorm.DB) error {
			return withTableOptions(tx).Migrator().CreateTable(
				&WorkspaceFile{}, &WorkspaceFileHistory{}, &Agent{}, &Message{}, &CronJob{},
				&MemoryRun{}, &ExtractionWatermark{}, &AppliedEffect{},
			)
		}},
		{Version: 2, Name: "agent fencing values", Up: func(tx *gorm.DB) error {
			return withTableOptions(tx).Migrator().CreateTable(&AgentFence{})
		}},
		{Version: 3, Name: "recall index", Up: func(tx *gorm.DB) error {
			if err := withTableOptions(tx).Migrator().CreateTable(
				&RecallChunk{}, &RecallEmbedding{}, &RecallFile{}, &RecallAgent{}, &RecallCursor{},
			); err != nil {
				return err
			}
			// The reconciler scans workspace files by update time (deletes set it too).
			return tx.Exec("CREATE INDEX idx_ws_update_time ON mate_workspace_file (update_time)").Error
		}},
		{Version: 4, Name: "agent erasure tombstones", Up: func(tx *gorm.DB) error {
			if err := withTableOptions(tx).Migrator().CreateTable(&AgentErasure{}); err != nil {
				return err
			}
			// An erasure finds the embeddings only its agent's chunks use by their hash.
			return tx.Exec("CREATE INDEX idx_rc_hash ON mate_recall_chunk (hash)").Error
		}},
		{Version: 5, Name: "agent core file budgets", Up: func(tx *gorm.DB) error {
			return withTableOptions(tx).Migrator().CreateTable(&AgentBudget{})
		}},
		{Version: 6, Name: "recall index format", Up: func(tx *gorm.DB) error {
			// The column and its index, named as gorm names them from RecallFile's tags.
			// Migration 3 creates the table from today's struct, which already has them.
			m := tx.Migrator()
			if !m.HasColumn(&RecallFile{}, "Format") {
				if err := m.AddColumn(&RecallFile{}, "Format"); err != nil {
					return err
				}
			}
			if !m.HasIndex(&RecallFile{}, "Format") {
				return m.CreateIndex(&RecallFile{}, "Format")
			}
			return nil
		}},
		{Version: 7, Name: "workspace file token counts", Up: func(tx *gorm.DB) error {
			// Migration 1 creates the table from today's struct, which already has them.
			m := tx.Migrator()
			for _, field := range []string{"TokenCount", "TokenEncoding", "TokenVersion"} {
				if !m.HasColumn(&WorkspaceFile{}, field) {
					if err := m.AddColumn(&WorkspaceFile{}, field); err != nil {
						return err
					}
				}
			}
			return nil
		}},
	}
}

// withTableOptions makes MySQL tables case- and accent-sensitive (utf8mb4_bin), so that
// MEMORY.md and memory.md are two files there as they are on SQLite: filenames,
// conversation ids and keys are case-sensitive identifiers, and a server default such as
// utf8mb4_general_ci would make them collide in unique keys.
func withTableOptions(tx *gorm.DB) *gorm.DB {
	if tx.Dialector.Name() == "mysql" {
		return tx.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	}
	return tx
}

// MigrationStatus is one migration and whether it has been applied.
type MigrationStatus struct {
	Version   int
	Name      string
	AppliedAt *time.Time
}

// Status lists the migrations with their applied time, if any.
func Status(ctx context.Context, db *gorm.DB) ([]MigrationStatus, error) {
	db = db.WithContext(ctx)
	if err := db.AutoMigrate(&schemaMigration{}); err != nil {
		return nil, fmt.Errorf("create mate_schema_migration: %w", err)
	}
	var applied []schemaMigration
	if err := db.Find(&applied).Error; err != nil {
		return nil, fmt.Errorf("read mate_schema_migration: %w", err)
	}
	at := map[int]time.Time{}
	for _, a := range applied {
		at[a.Version] = a.AppliedAt
	}
	var out []MigrationStatus
	for _, m := range Migrations() {
		s := MigrationStatus{Version: m.Version, Name: m.Name}
		if t, ok := at[m.Version]; ok {
			s.AppliedAt = &t
		}
		out = append(out, s)
	}
	return out, nil
}

// migrationTimeout bounds a migration run whose context has no deadline.
const migrationTimeout = time.Hour

// Migrate applies every pending migration, each in its own transaction where the database
// allows DDL in one. On MySQL a named lock keeps two starting processes from racing.
func Migrate(ctx context.Context, db *gorm.DB) error {
	if _, ok := ctx.Deadline(); !ok {
		// DDL may take long: not the default statement deadline (see Watch).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, migrationTimeout)
		defer cancel()
	}
	return db.WithContext(ctx).Connection(func(pinned *gorm.DB) error {
		// Each statement gets a fresh session on the pinned connection; reusing one *gorm.DB
		// would carry the previous statement's model into the next.
		conn := pinned.Session(&gorm.Session{NewDB: true})
		if conn.Dialector.Name() == "mysql" {
			var got int
			if err := conn.Raw("SELECT GET_LOCK('matememory_migrate', 60)").Scan(&got).Error; err != nil || got != 1 {
				return fmt.Errorf("take migration lock: got %d: %v", got, err)
			}
			defer conn.Exec("SELECT RELEASE_LOCK('matememory_migrate')")
		}
		if err := conn.AutoMigrate(&schemaMigration{}); err != nil {
			return fmt.Errorf("create mate_schema_migration: %w", err)
		}
		for _, m := range Migrations() {
			var n int64
			if err := pinned.Session(&gorm.Session{NewDB: true}).Model(&schemaMigration{}).Where("version = ?", m.Version).Count(&n).Error; err != nil {
				return fmt.Errorf("read mate_schema_migration: %w", err)
			}
			if n > 0 {
				continue
			}
			if err := m.Up(pinned.Session(&gorm.Session{NewDB: true})); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
			rec := schemaMigration{Version: m.Version, Name: m.Name, AppliedAt: time.Now().UTC()}
			if err := pinned.Session(&gorm.Session{NewDB: true}).Create(&rec).Error; err != nil {
				return fmt.Errorf("record migration %d: %w", m.Version, err)
			}
		}
		return nil
	})
}
