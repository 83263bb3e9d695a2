package store

import (
	"context"
	"github.com/matememory/matememory/pkg/internal/fault"
	"time"

	"gorm.io/gorm"
)

// AgentErasure is the tombstone and audit record of an agent's erasure. It holds no
// content: the agent id, when, who asked, and the receipt's counts per store. An event of
// the agent that happened before ErasedAt (one in flight, delayed, redelivered or replayed)
// is refused by the pipeline, so nothing of the erased agent comes back; events after it
// start the agent anew. The row is kept for good: it holds nothing personal, and a replay of
// an old copy of the stream may come at any time.
type AgentErasure struct {
	AgentID  int64     `gorm:"primaryKey;autoIncrement:false"`
	ErasedAt time.Time `gorm:"not null"`
	Actor    string    `gorm:"size:64;not null"`
	// Receipt is the erasure's receipt as JSON: counts per store, no content.
	Receipt string `gorm:"type:text"`
	// Erasures counts the erasures of this agent id (one row per agent; the last one's
	// time and receipt).
	Erasures int `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (AgentErasure) TableName() string { return "mate_agent_erasure" }

// ErasedAt reports when the agent was last erased (ok false: never). db may be a
// transaction, so a write can check the tombstone in the transaction it commits in.
func ErasedAt(ctx context.Context, db *gorm.DB, agentID int64) (time.Time, bool, error) {
	var rows []AgentErasure
	if err := db.WithContext(ctx).Raw("SELECT agent_id, erased_at FROM mate_agent_erasure WHERE agent_id = ?", agentID).Scan(&rows).Error; err != nil {
		return time.Time{}, false, err
	}
	if len(rows) == 0 {
		return time.Time{}, false, nil
	}
	return rows[0].ErasedAt, true, nil
}

// ErrErased is returned by a write refused because the agent was erased after what it
// writes happened.
var ErrErased = fault.New(fault.ErrErased, "the agent was erased after this happened")

// CheckNotErasedSince fails with ErrErased when the agent was erased at or after t.
func CheckNotErasedSince(ctx context.Context, db *gorm.DB, agentID int64, t time.Time) error {
	at, ok, err := ErasedAt(ctx, db, agentID)
	if err != nil {
		return err
	}
	if ok && !t.After(at) {
		return ErrErased
	}
	return nil
}
