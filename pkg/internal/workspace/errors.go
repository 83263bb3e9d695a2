package workspace

import (
	"errors"
	"fmt"

	"github.com/matememory/matememory/pkg/internal/fault"
)

// Sentinel errors; check with errors.Is. Each matches its kind in fault too.
var (
	// ErrNotFound: no live file of that name.
	ErrNotFound = fault.New(fault.ErrNotFound, "workspace file not found")
	// ErrConflict: the file changed since the version the caller read (compare-and-swap lost),
	// or a create found the file already there.
	ErrConflict = fault.New(fault.ErrConflict, "workspace file version conflict")
	// ErrInvalid: bad input (name, size, edit arguments); the error's text says what.
	ErrInvalid = fault.ErrInvalid
)

// InvalidError is bad input, with a message for the caller: fault's one invalid-input error.
type InvalidError = fault.Invalid

// ErrTooLarge is matched by a change refused because the content would pass the size cap
// (it matches ErrInvalid too): an append that may go to another file (the archive's next
// note of the day) tells it from other bad input.
var ErrTooLarge = errors.New("content over the size cap")

// TooLargeError is a change whose content would pass the size cap.
type TooLargeError struct{ InvalidError }

// Is makes errors.Is(err, ErrTooLarge) and errors.Is(err, ErrInvalid) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge || target == ErrInvalid }

// Unwrap is the invalid-input error (errors.As finds a *InvalidError).
func (e *TooLargeError) Unwrap() error { return &e.InvalidError }

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

// Unwrap makes errors.Is(err, ErrConflict) and errors.Is(err, fault.ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

func notFound(name string) error { return fmt.Errorf("%w: %s", ErrNotFound, name) }
