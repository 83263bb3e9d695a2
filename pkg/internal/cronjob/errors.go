package cronjob

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors; check with errors.Is.
var (
	// ErrInvalid: bad input; the error's text says what and how to fix it.
	ErrInvalid = errors.New("invalid cron job")
	// ErrNotFound: no live job with that id (or not one the caller may see).
	ErrNotFound = errors.New("cron job not found")
	// ErrConflict: the agent already has a live job of that name.
	ErrConflict = errors.New("cron job name already used")
)

// InvalidError is bad input, with a message for the caller (HTTP 400).
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// HTTPStatus implements httpapi.StatusCoder.
func (e *InvalidError) HTTPStatus() int { return http.StatusBadRequest }

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

type notFoundError struct{ id int64 }

func (e *notFoundError) Error() string        { return fmt.Sprintf("cron job %d not found", e.id) }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }
func (e *notFoundError) HTTPStatus() int      { return http.StatusNotFound }

type conflictError struct {
	agentID int64
	name    string
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("agent %d already has a cron job named %q; choose another name or update that job", e.agentID, e.name)
}
func (e *conflictError) Is(target error) bool { return target == ErrConflict }
func (e *conflictError) HTTPStatus() int      { return http.StatusConflict }
