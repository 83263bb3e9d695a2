package workspace

import (
	"errors"
	"fmt"
)

// Sentinel errors; check with errors.Is.
var (
	// ErrNotFound: no live file of that name.
	ErrNotFound = errors.New("workspace file not found")
	// ErrConflict: the file changed since the version the caller read (compare-and-swap lost),
	// or a create found the file already there.
	ErrConflict = errors.New("workspace file version conflict")
	// ErrInvalid: bad input (name, size, edit arguments); the error's text says what.
	ErrInvalid = errors.New("invalid workspace request")
)

// InvalidError is bad input, with a message for the caller.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// ConflictError carries the version the caller expected and the one stored.
type ConflictError struct {
	Filename string
	Expected int64
	Actual   int64
	// Attempts is set when an unconditional change (AnyVersion) lost the race that many
	// times in a row.
	Attempts int
}

func (e *ConflictError) Error() string {
	switch {
	case e.Expected == CreateOnly:
		return fmt.Sprintf("%s already exists (version %d)", e.Filename, e.Actual)
	case e.Expected == AnyVersion:
		return fmt.Sprintf("%s is being changed by others continuously: %d attempts in a row lost the race (current version %d); retry later",
			e.Filename, e.Attempts, e.Actual)
	}
	return fmt.Sprintf("%s changed: expected version %d, current version is %d; re-read and retry", e.Filename, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

func notFound(name string) error { return fmt.Errorf("%w: %s", ErrNotFound, name) }
