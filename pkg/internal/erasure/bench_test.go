package erasure_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/erasure"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// BenchmarkEraseAgent erases an agent with 10,000 files (each with a history version) and
// 100,000 messages in 1,000 conversations, beside a second agent of the same size, with 1,000
// of its events on MATE_EVENTS, on SQLite and the embedded NATS file store. The baseline, in
// the same run, is the plain DELETE of the same rows (no tombstone, no vacuum, no stream).
//
//	go test ./pkg/internal/erasure -run '^$' -bench EraseAgent -benchtime=1x
func BenchmarkEraseAgent(b *testing.B) {
	for _, mode := range []string{"baseline: plain delete", "erasure"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db := storetest.SQLite(b)
				_, dialer := bustest.Server(b)
				nc, err := dialer.Connect("bench")
				if err != nil {
					b.Fatal(err)
				}
				js, _ := jetstream.New(nc)
				ctx := context.Background()
				if _, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{Name: bus.StreamEvents, Subjects: []string{bus.SubjectCompleted + ".>"}}); err != nil {
					b.Fatal(err)
				}
				for _, agent := range []int64{1, 2} {
					seed(b, db, agent)
				}
				for i := range 1000 {
					if _, err := js.Publish(ctx, bus.AgentSubject(bus.SubjectCompleted, 1), []byte(fmt.Sprintf(`{"eventId":"e%d","agentId":1}`, i))); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				if mode == "erasure" {
					if _, err := erasure.New(erasure.Deps{DB: db.DB, JS: js, Log: slog.New(slog.DiscardHandler)}).EraseAgent(ctx, 1, "bench"); err != nil {
						b.Fatal(err)
					}
				} else {
					for _, t := range []string{"mate_workspace_file_history", "mate_workspace_file", "mate_message"} {
						if err := db.DB.Exec("DELETE FROM "+t+" WHERE agent_id = ?", 1).Error; err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(time.Since(start).Seconds(), "s/erasure")
				b.StopTimer()
				nc.Close()
			}
		})
	}
}

// seed writes an agent's 10,000 files with a history version each and 100,000 messages.
func seed(b *testing.B, db storetest.DB, agent int64) {
	now := time.Now().UTC()
	body := strings.Repeat("a remembered fact about the user. ", 8)
	files := make([]store.WorkspaceFile, 0, 500)
	hist := make([]store.WorkspaceFileHistory, 0, 500)
	for i := range 10000 {
		name := fmt.Sprintf("notes/n%05d.md", i)
		files = append(files, store.WorkspaceFile{AgentID: agent, Filename: name, Content: body, FileSize: int64(len(body)), Version: 2, CreateTime: now, UpdateTime: now})
		hist = append(hist, store.WorkspaceFileHistory{FileID: int64(i + 1), AgentID: agent, Filename: name, Version: 1, Content: body, Action: "write", Actor: "tool", CreateTime: now})
		if len(files) == cap(files) {
			if err := db.DB.CreateInBatches(&files, 500).Error; err != nil {
				b.Fatal(err)
			}
			if err := db.DB.CreateInBatches(&hist, 500).Error; err != nil {
				b.Fatal(err)
			}
			files, hist = files[:0], hist[:0]
		}
	}
	msgs := make([]store.Message, 0, 1000)
	for i := range 100000 {
		msgs = append(msgs, store.Message{AgentID: agent, ConversationID: fmt.Sprintf("c%d", i/100), Role: "user", Content: body, CreateTime: now})
		if len(msgs) == cap(msgs) {
			if err := db.DB.CreateInBatches(&msgs, 1000).Error; err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}
