package store_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// BenchmarkStatements measures what the driver costs per statement, the part the issue's
// profile put at 13–16 % of the pipeline's CPU on SQLite (every statement prepared again).
// Each iteration runs a fixed workload and reports its own figures:
//
//	reads: three point reads (the agent, a watermark, a file by name), 2,000 times;
//	tx:    one transaction appending a message and moving a watermark, 500 times.
//
// CPU-µs/op is the process's user+system CPU (getrusage) per repetition, p50/p99 its wall
// time. Run: go test ./pkg/internal/store -run '^$' -bench Statements -benchtime=1x -count=3
// (MATE_TEST_MYSQL_DSN adds MariaDB; client-side CPU only, mariadbd's is not counted).
func BenchmarkStatements(b *testing.B) {
	dbs := []func(testing.TB) (storetest.DB, bool){
		func(tb testing.TB) (storetest.DB, bool) { return sqliteWith(tb, "full"), true },
		func(tb testing.TB) (storetest.DB, bool) { return sqliteWith(tb, "normal"), true },
		storetest.MySQL,
	}
	for _, open := range dbs {
		db, ok := open(b)
		if !ok {
			continue
		}
		ctx := context.Background()
		seed(b, db.DB)
		b.Run(db.Name+"/reads", func(b *testing.B) {
			for b.Loop() {
				measure(b, 2000, func(i int) error {
					var a store.Agent
					if err := db.DB.WithContext(ctx).First(&a, "id = ?", 1+i%10).Error; err != nil {
						return err
					}
					var w store.ExtractionWatermark
					if err := db.DB.WithContext(ctx).Where("agent_id = ? AND conversation_id = ?", 1+i%10, "c").Take(&w).Error; err != nil {
						return err
					}
					var f store.WorkspaceFile
					return db.DB.WithContext(ctx).Where("agent_id = ? AND filename = ? AND deleted = 0", 1+i%10, "MEMORY.md").Take(&f).Error
				})
			}
		})
		b.Run(db.Name+"/tx", func(b *testing.B) {
			for b.Loop() {
				measure(b, 500, func(i int) error {
					return db.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
						m := store.Message{AgentID: int64(1 + i%10), ConversationID: "c", Role: "user", Content: "hello", CreateTime: time.Now()}
						if err := tx.Create(&m).Error; err != nil {
							return err
						}
						return tx.Model(&store.ExtractionWatermark{}).
							Where("agent_id = ? AND conversation_id = ?", m.AgentID, "c").
							Updates(map[string]any{"last_message_id": m.ID, "update_time": time.Now()}).Error
					})
				})
			}
		})
	}
}

// sqliteWith is SQLite with mate.database.sqlite-synchronous set to sync: "full" (the
// default, an fsync at every commit) or "normal" (none: the driver's cost apart from the
// disk's).
func sqliteWith(tb testing.TB, sync string) storetest.DB {
	db, err := store.Open("sqlite", "", tb.TempDir(), store.WithSQLiteSynchronous(sync))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close(db) })
	if err := store.Migrate(context.Background(), db); err != nil {
		tb.Fatal(err)
	}
	return storetest.DB{Name: "sqlite-" + sync, Driver: "sqlite", DB: db}
}

func seed(b *testing.B, db *gorm.DB) {
	b.Helper()
	now := time.Now()
	for id := int64(1); id <= 10; id++ {
		rows := []any{
			&store.Agent{ID: id, Language: "en", Timezone: "UTC", CreateTime: now},
			&store.ExtractionWatermark{AgentID: id, ConversationID: "c", UpdateTime: now},
			&store.WorkspaceFile{AgentID: id, Filename: "MEMORY.md", Content: "# Memory", Enabled: true, CreateTime: now, UpdateTime: now},
		}
		for _, r := range rows {
			if err := db.Create(r).Error; err != nil {
				b.Fatalf("seed: %v", err)
			}
		}
	}
}

func measure(b *testing.B, n int, op func(i int) error) {
	b.Helper()
	lat := make([]time.Duration, 0, n)
	cpu0 := cpuTime()
	for i := range n {
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatalf("op %d: %v", i, err)
		}
		lat = append(lat, time.Since(start))
	}
	cpu := cpuTime() - cpu0
	slices.Sort(lat)
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "CPU-µs/op")
	b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
