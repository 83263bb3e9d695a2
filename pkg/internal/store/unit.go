package store

import (
	"context"

	"gorm.io/gorm"
)

// Units opens units of work on the database. The application (the summarizer's commit, for
// one) opens a unit and hands it to the repositories that take part in it (workspace,
// conversation, ledger, fence), so that what they write commits together or not at all and
// the transaction has one owner. No repository's API takes or returns a *gorm.DB: they
// accept a *Tx and reach the transaction through it.
type Units struct{ db *gorm.DB }

// NewUnits opens units of work on db.
func NewUnits(db *gorm.DB) *Units { return &Units{db: db} }

// Tx is one unit of work: a database transaction that repositories join.
type Tx struct{ db *gorm.DB }

// Do runs fn in one transaction: everything fn's repositories write commits when fn returns
// nil, and nothing does when it returns an error (which Do returns).
func (u *Units) Do(ctx context.Context, fn func(tx *Tx) error) error {
	return u.db.WithContext(ctx).Transaction(func(db *gorm.DB) error { return fn(&Tx{db: db}) })
}

// Join is the transaction as a repository runs its statements in it.
func (t *Tx) Join() *gorm.DB { return t.db }

// MySQL reports whether the unit runs on MySQL/MariaDB (else SQLite), for the statements
// whose upsert is spelled differently.
func (t *Tx) MySQL() bool { return t.db.Dialector.Name() == "mysql" }

// InTx wraps a transaction a repository opened itself as a unit (a repository's own
// transactional write that calls a hook taking a *Tx).
func InTx(db *gorm.DB) *Tx { return &Tx{db: db} }
