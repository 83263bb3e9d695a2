// Package app is the entry point every MateMemory binary calls: cmd/api, cmd/summarizer,
// cmd/emergence and cmd/scheduler are each one line over Main. What a process is made of
// (the composition root) lives in pkg/internal/app; nothing here is meant to be imported
// by programs other than those four.
package app

import (
	internal "github.com/matememory/matememory/pkg/internal/app"
)

// The parts a binary can run; each cmd/ passes its own as the default target.
const (
	TargetAll        = internal.TargetAll
	TargetAPI        = internal.TargetAPI
	TargetSummarizer = internal.TargetSummarizer
	TargetEmergence  = internal.TargetEmergence
	TargetScheduler  = internal.TargetScheduler
)

// Main runs the binary whose own part is defaultTarget with the process's arguments,
// environment and standard streams, and returns its exit code: 0 on success or help,
// 2 for bad usage, 1 for a failure at run time.
func Main(defaultTarget string) int { return internal.Main(defaultTarget) }
