package store

import "time"

// RecallChunk is one searchable piece of an agent's memory file: a heading-and-paragraph
// section of about 400 tokens, with where it sits in the file and what version it came from.
// The chunks of one file are replaced together whenever the file changes.
type RecallChunk struct {
	ID       int64  `gorm:"primaryKey;autoIncrement"`
	AgentID  int64  `gorm:"not null;index:idx_rc_agent_file,priority:1"`
	Filename string `gorm:"size:256;not null;index:idx_rc_agent_file,priority:2"`
	// Ordinal is the chunk's place in its file (0-based).
	Ordinal   int `gorm:"not null"`
	StartLine int `gorm:"not null"`
	EndLine   int `gorm:"not null"`
	// Heading is the nearest Markdown heading above the chunk, if any.
	Heading string `gorm:"size:512"`
	Text    string `gorm:"type:longtext"`
	// Terms is the analysed text (space-separated terms), so a cold cache does not re-analyse.
	Terms string `gorm:"type:longtext"`
	// Hash is the SHA-256 (hex) of the text that was embedded; the embedding cache key.
	Hash        string `gorm:"size:64;not null"`
	FileVersion int64  `gorm:"not null"`
	// NoteDate is the date of a dated note (YYYY-MM-DD in its path under memory/), else the
	// file's update time; Dated says which.
	NoteDate time.Time `gorm:"not null"`
	Dated    bool      `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (RecallChunk) TableName() string { return "mate_recall_chunk" }

// RecallEmbedding caches one embedding by model and text hash, shared by every agent whose
// memory has the same text (the vector says nothing about whose text it was).
type RecallEmbedding struct {
	Model string `gorm:"primaryKey;size:128"`
	Hash  string `gorm:"primaryKey;size:64"`
	Dims  int    `gorm:"not null"`
	// Vector is Dims float32 values, little-endian.
	Vector     []byte    `gorm:"not null"`
	CreateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (RecallEmbedding) TableName() string { return "mate_recall_embedding" }

// RecallFile records which version of a workspace file the chunks were built from.
type RecallFile struct {
	AgentID  int64  `gorm:"primaryKey;autoIncrement:false"`
	Filename string `gorm:"primaryKey;size:256"`
	// FileID and Version identify the workspace row and version indexed (a file deleted and
	// created again is a new row starting at version 1).
	FileID  int64 `gorm:"not null"`
	Version int64 `gorm:"not null"`
	Chunks  int   `gorm:"not null"`
	// EmbedPending is true while some chunk has no embedding for the configured model yet
	// (endpoint down): the indexer retries and the reconciler finds it again.
	EmbedPending bool      `gorm:"not null;index"`
	IndexTime    time.Time `gorm:"not null"`
	// Format is the chunking and term analysis the chunks were built with (recall.IndexFormat;
	// 0 = before it was recorded): rows of an older format are built again, without new
	// embeddings, when a newer version runs.
	Format int `gorm:"not null;default:0;index"`
}

// TableName implements gorm's Tabler.
func (RecallFile) TableName() string { return "mate_recall_file" }

// RecallAgent carries a generation per agent, bumped in every index transaction: a search
// compares it with its cached copy, so a replica never serves chunks older than the record.
type RecallAgent struct {
	AgentID    int64 `gorm:"primaryKey;autoIncrement:false"`
	Generation int64 `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (RecallAgent) TableName() string { return "mate_recall_agent" }

// RecallCursor is the reconciler's watermark over mate_workspace_file.update_time.
type RecallCursor struct {
	Name       string    `gorm:"primaryKey;size:64"`
	UpdateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (RecallCursor) TableName() string { return "mate_recall_cursor" }
