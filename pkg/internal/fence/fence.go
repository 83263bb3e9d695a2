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

	"github.com/matememory/matememory/pkg/internal/store"
)

// ErrFenced is returned when a newer lease holder has already written for the agent.
var ErrFenced = errors.New("fenced out: a newer holder of the agent's lease has written")

// Token orders lease holders: by Epoch (the lease bucket's creation), then Revision.
type Token struct {
	Epoch    int64
	Revision uint64
}

func (t Token) String() string { return fmt.Sprintf("%d/%d", t.Epoch, t.Revision) }

// Check raises agentID's fencing value to t inside the unit of work, or returns ErrFenced (wrapped with
// the stored value) when a newer token has written. Call it in the transaction of the
// write it guards; on MySQL it also locks the agent's fence row until that transaction
// ends, so fenced writers of one agent are serialized.
//
// It is one statement, an upsert whose update applies only while the stored token is not
// newer: an agent's first write inserts its row, later ones raise it. (An UPDATE first and
// an INSERT when it matched nothing would take a gap lock on MySQL for a new agent, and two
// new agents' first writes in one gap would deadlock.)
func Check(unit *store.Tx, agentID int64, t Token, now time.Time) error {
	rev := int64(t.Revision)
	tx := unit.Join()
	var res *gorm.DB
	if unit.MySQL() {
		// Assignments run left to right and see the columns already assigned: revision is
		// decided on the stored values; epoch then sees the new revision, which only keeps
		// the condition as it was; writes counts a raise (so a raise always changes the row).
		res = tx.Exec("INSERT INTO mate_agent_fence (agent_id, epoch, revision, writes, update_time) VALUES (?, ?, ?, 1, ?) "+
			"ON DUPLICATE KEY UPDATE "+
			"revision = IF(epoch < VALUES(epoch) OR (epoch = VALUES(epoch) AND revision <= VALUES(revision)), VALUES(revision), revision), "+
			"writes = IF(epoch < VALUES(epoch) OR (epoch = VALUES(epoch) AND revision = VALUES(revision)), writes + 1, writes), "+
			"update_time = IF(epoch < VALUES(epoch) OR (epoch = VALUES(epoch) AND revision = VALUES(revision)), VALUES(update_time), update_time), "+
			"epoch = IF(epoch < VALUES(epoch) OR (epoch = VALUES(epoch) AND revision = VALUES(revision)), VALUES(epoch), epoch)",
			agentID, t.Epoch, rev, now)
	} else {
		res = tx.Exec("INSERT INTO mate_agent_fence (agent_id, epoch, revision, writes, update_time) VALUES (?, ?, ?, 1, ?) "+
			"ON CONFLICT (agent_id) DO UPDATE SET epoch = excluded.epoch, revision = excluded.revision, "+
			"writes = mate_agent_fence.writes + 1, update_time = excluded.update_time "+
			"WHERE mate_agent_fence.epoch < excluded.epoch OR (mate_agent_fence.epoch = excluded.epoch AND mate_agent_fence.revision <= excluded.revision)",
			agentID, t.Epoch, rev, now)
	}
	if res.Error != nil {
		return fmt.Errorf("check fence of agent %d: %w", agentID, res.Error)
	}
	// MySQL: 1 inserted, 2 updated, 0 left as it was; SQLite: 1 inserted or updated, 0 not.
	if res.RowsAffected > 0 {
		return nil
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

// InTx fences the unit of work it runs in with h's token at that moment; it fits
// workspace.Change.InTx.
func InTx(h Holder, agentID int64) func(tx *store.Tx) error {
	return func(tx *store.Tx) error { return Check(tx, agentID, TokenOf(h), time.Now().UTC()) }
}
