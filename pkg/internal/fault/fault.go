// Package fault is the one vocabulary of what went wrong that MateMemory's parts share: one
// invalid-input error (Invalid) and sentinels for the other kinds (not found, conflict, a
// failed precondition, an erased agent, too large, unavailable). Domain packages return
// them, or errors of their own that match them through errors.Is (a package's
// ErrNotFound made with New); the ports map them once each: the HTTP port to statuses
// (httpapi.Classify), the message runtime to ack, retry or dead letter. Nothing here knows a
// transport.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kinds of failure, checked with errors.Is.
var (
	// ErrInvalid: the input is wrong and stays wrong; the error's text says what and how to
	// fix it. Every *Invalid matches it.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound: no such thing (file, job, dead letter, tool).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the state changed under the caller (a lost compare-and-swap), or what it
	// creates is there already.
	ErrConflict = errors.New("conflict")
	// ErrPrecondition: a condition the caller set (If-None-Match: *) does not hold.
	ErrPrecondition = errors.New("precondition failed")
	// ErrErased: the agent was erased after what the request refers to.
	ErrErased = errors.New("agent erased")
	// ErrTooLarge: the input is over a limit no retry changes.
	ErrTooLarge = errors.New("too large")
	// ErrUnavailable: a dependency (JetStream, a KV bucket) cannot answer now; retry.
	ErrUnavailable = errors.New("unavailable")
)

// Invalid is input the caller got wrong, with a message that says what was wrong and what
// to do. It matches ErrInvalid.
type Invalid struct{ Msg string }

func (e *Invalid) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Invalid) Is(target error) bool { return target == ErrInvalid }

// Invalidf builds an *Invalid.
func Invalidf(format string, args ...any) error {
	return &Invalid{Msg: fmt.Sprintf(format, args...)}
}

// Error is a failure of a kind (one of the sentinels above) with its own message: a
// package's own sentinel (workspace.ErrNotFound) or a message for one case.
type Error struct {
	Kind error
	Msg  string
	// Err is the cause, if any (kept for errors.Is and errors.As, not shown).
	Err error
}

func (e *Error) Error() string { return e.Msg }

// Is makes errors.Is(err, e.Kind) true.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind with message msg.
func New(kind error, msg string) error { return &Error{Kind: kind, Msg: msg} }

// Errorf returns an error of kind with a formatted message.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of kind with message msg and cause err.
func Wrap(kind error, err error, msg string) error { return &Error{Kind: kind, Msg: msg, Err: err} }

// ErrRateLimited: the caller asked too often; a *Limited says when to come back.
var ErrRateLimited = errors.New("rate limited")

// Limited refuses a request for a rate limit: RetryAfter is when the next one is accepted.
// It matches ErrRateLimited.
type Limited struct {
	Msg        string
	RetryAfter time.Duration
}

func (e *Limited) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *Limited) Is(target error) bool { return target == ErrRateLimited }
