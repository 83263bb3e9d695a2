package fence_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/fence"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

func TestCheckRefusesAnOlderToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		now := time.Now().UTC()
		check := func(agent int64, tok fence.Token) error {
			return db.DB.Transaction(func(tx *gorm.DB) error { return fence.Check(store.InTx(tx), agent, tok, now) })
		}
		// A first holder, then the same holder again (same revision, and after a renewal).
		for _, tok := range []fence.Token{{Epoch: 5, Revision: 10}, {Epoch: 5, Revision: 10}, {Epoch: 5, Revision: 12}} {
			if err := check(1, tok); err != nil {
				t.Fatalf("token %s refused: %v", tok, err)
			}
		}
		// A newer holder wrote: the older one is fenced out, its transaction rolled back.
		if err := check(1, fence.Token{Epoch: 5, Revision: 20}); err != nil {
			t.Fatal(err)
		}
		err := db.DB.Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&store.AppliedEffect{Key: "stale-write", CreateTime: now}).Error; err != nil {
				return err
			}
			return fence.Check(store.InTx(tx), 1, fence.Token{Epoch: 5, Revision: 12}, now)
		})
		if !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("stale token: %v, want ErrFenced", err)
		}
		var n int64
		db.DB.Model(&store.AppliedEffect{}).Where("`key` = ?", "stale-write").Count(&n)
		if n != 0 {
			t.Fatal("the fenced transaction's write landed")
		}
		// A recreated lease bucket (newer epoch, revisions restarted) orders after the old one.
		if err := check(1, fence.Token{Epoch: 6, Revision: 1}); err != nil {
			t.Fatalf("newer epoch refused: %v", err)
		}
		if err := check(1, fence.Token{Epoch: 5, Revision: 99}); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("older epoch: %v, want ErrFenced", err)
		}
		// Agents are fenced independently.
		if err := check(2, fence.Token{Epoch: 5, Revision: 1}); err != nil {
			t.Fatalf("another agent: %v", err)
		}
	})
}

// New agents' first fenced writes run side by side without failing each other (on MySQL an
// UPDATE that matched nothing followed by an INSERT would deadlock on the gap lock).
func TestFirstWritesOfNewAgentsDoNotCollide(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		now := time.Now().UTC()
		const n = 16
		errs := make(chan error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(agent int64) {
				defer wg.Done()
				<-start
				errs <- db.DB.Transaction(func(tx *gorm.DB) error {
					if err := fence.Check(store.InTx(tx), agent, fence.Token{Epoch: 7, Revision: uint64(agent)}, now); err != nil {
						return err
					}
					time.Sleep(20 * time.Millisecond) // hold the locks while the others arrive
					return tx.Create(&store.AppliedEffect{Key: fmt.Sprintf("first-%d", agent), CreateTime: now}).Error
				})
			}(int64(100 + 2*i))
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("first write: %v", err)
			}
		}
	})
}
