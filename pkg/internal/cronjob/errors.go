package cronjob

import (
	"fmt"

	"github.com/matememory/matememory/pkg/internal/fault"
)

// Sentinel errors; check with errors.Is. Each matches its kind in fault too.
var (
	// ErrInvalid: bad input; the error's text says what and how to fix it.
	ErrInvalid = fault.ErrInvalid
	// ErrNotFound: no live job with that id (or not one the caller may see).
	ErrNotFound = fault.New(fault.ErrNotFound, "cron job not found")
	// ErrConflict: the agent already has a live job of that name.
	ErrConflict = fault.New(fault.ErrConflict, "cron job name already used")
)

// InvalidError is bad input, with a message for the caller: fault's one invalid-input error.
type InvalidError = fault.Invalid

func invalidf(format string, args ...any) error { return fault.Invalidf(format, args...) }

// NotFound is the error for job id: not there, or of an agent the caller may not act for
// (so ids do not reveal other tenants' jobs).
func NotFound(id int64) error { return &notFoundError{id: id} }

type notFoundError struct{ id int64 }

func (e *notFoundError) Error() string { return fmt.Sprintf("cron job %d not found", e.id) }
func (e *notFoundError) Unwrap() error { return ErrNotFound }

type conflictError struct {
	agentID int64
	name    string
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("agent %d already has a cron job named %q; choose another name or update that job", e.agentID, e.name)
}
func (e *conflictError) Unwrap() error { return ErrConflict }
