// Package fence checks, inside a database transaction, that the writer still holds the
// agent's lease: the lease is in NATS KV, but what it protects is in the database, so a
// holder that lost its lease (cut off from NATS, a commit delayed on a slow network) could
// otherwise land a write after the new holder's.
//
// Every lease holder carries a Token (the lease bucket's epoch and the lease revision,
// which JetStream only ever increases). A fenced transaction raises the agent's stored
// fencing value to its token with a conditional UPDATE that matches only while the stored
// value is not newer; when a newer holder has written, nothing matches and the transaction
// fails with ErrFenced, so its other writes roll back with it.
package fence

import (
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/matememory/matememory/pkg/store"
)

// ErrFenced is returned when a newer lease holder has already written for the agent.
var ErrFenced = errors.New("fenced out: a newer holder of the agent's lease has written")

// Token orders lease holders: by Epoch (the lease bucket's creation), then Revision.
type Token struct {
	Epoch    int64
	Revision uint64
}

func (t Token) String() string { return fmt.Sprintf("%d/%d", t.Epoch, t.Revision) }

// Check raises agentID's fencing value to t inside tx, or returns ErrFenced (wrapped with
// the stored value) when a newer token has written. Call it in the transaction of the
// write it guards; on MySQL it also locks the agent's fence row until that transaction
// ends, so fenced writers of one agent are serialized. An agent fenced before costs one
// statement; the first write of an agent inserts its row.
func Check(tx *gorm.DB, agentID int64, t Token, now time.Time) error {
	rev := int64(t.Revision)
	for attempt := 0; ; attempt++ {
		res := tx.Model(&store.AgentFence{}).
			Where("agent_id = ? AND (epoch < ? OR (epoch = ? AND revision <= ?))", agentID, t.Epoch, t.Epoch, rev).
			Updates(map[string]any{"epoch": t.Epoch, "revision": rev, "writes": gorm.Expr("writes + 1"), "update_time": now})
		if res.Error != nil {
			return fmt.Errorf("check fence of agent %d: %w", agentID, res.Error)
		}
		if res.RowsAffected == 1 {
			return nil
		}
		if attempt > 0 {
			break
		}
		// No row matched: the agent has none yet, or a newer token is stored. Inserting ours
		// settles the first case; when another writer's row is there (or lands first), the
		// update is tried once more against it.
		row := store.AgentFence{AgentID: agentID, Epoch: t.Epoch, Revision: rev, Writes: 1, UpdateTime: now}
		ins := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if ins.Error != nil {
			return fmt.Errorf("create fence of agent %d: %w", agentID, ins.Error)
		}
		if ins.RowsAffected == 1 {
			return nil
		}
	}
	var cur store.AgentFence
	if err := tx.Where("agent_id = ?", agentID).Take(&cur).Error; err != nil {
		return fmt.Errorf("%w (agent %d, token %s)", ErrFenced, agentID, t)
	}
	return fmt.Errorf("%w (agent %d: token %s, stored %d/%d)", ErrFenced, agentID, t, cur.Epoch, cur.Revision)
}

// Holder is what carries a fencing token: *lease.Lease.
type Holder interface {
	Epoch() int64
	Revision() uint64
}

// TokenOf is h's token now (renewals raise the revision).
func TokenOf(h Holder) Token { return Token{Epoch: h.Epoch(), Revision: h.Revision()} }

// InTx fences the transaction it runs in with h's token at that moment; it fits
// workspace.Change.InTx.
func InTx(h Holder, agentID int64) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error { return Check(tx, agentID, TokenOf(h), time.Now().UTC()) }
}
