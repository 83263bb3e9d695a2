package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/fault"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Error is an error with an HTTP status and a message for the caller.
type Error struct {
	Status int
	Msg    string
	Header http.Header
	Err    error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// Classify maps an error to a status and a message: the HTTP port's one mapping of fault's
// vocabulary (and of this package's own *Error) to statuses. The message is the error's
// text; context errors say so.
func Classify(err error) (int, string) {
	st, msg, _ := classify(err)
	return st, msg
}

// classify is Classify with the headers the answer carries (an *Error's, a rate limit's
// Retry-After).
func classify(err error) (int, string, http.Header) {
	var he *Error
	var limited *fault.Limited
	switch {
	case errors.As(err, &he):
		return he.Status, he.Msg, he.Header
	case errors.As(err, &limited):
		secs := max(int((limited.RetryAfter+time.Second-1)/time.Second), 1)
		return http.StatusTooManyRequests, err.Error(), http.Header{"Retry-After": {strconv.Itoa(secs)}}
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.status, err.Error(), nil
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timed out: " + err.Error(), nil
	case errors.Is(err, context.Canceled):
		return 499, "request canceled", nil
	}
	return http.StatusInternalServerError, err.Error(), nil
}

// kinds are fault's kinds and their statuses, in the order they are checked (an error of
// two kinds answers with the first).
var kinds = []struct {
	kind   error
	status int
}{
	{fault.ErrInvalid, http.StatusBadRequest},
	{fault.ErrNotFound, http.StatusNotFound},
	{fault.ErrConflict, http.StatusConflict},
	{fault.ErrErased, http.StatusConflict},
	{fault.ErrPrecondition, http.StatusPreconditionFailed},
	{fault.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{fault.ErrRateLimited, http.StatusTooManyRequests},
	{fault.ErrUnavailable, http.StatusServiceUnavailable},
}

// MaxBodyBytes bounds request bodies (file content limit plus JSON overhead).
const MaxBodyBytes = 8 << 20

// PathInt64 parses a positive integer path parameter.
func PathInt64(r *http.Request, name string) (int64, error) {
	raw := r.PathValue(name)
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n <= 0 {
		return 0, BadRequest("%s must be a positive integer, got %q", name, raw)
	}
	return n, nil
}

// ParseIfMatch reads an If-Match value: a version ("3", "W/\"3\""), 0 for create only;
// empty or * is workspace.AnyVersion.
func ParseIfMatch(header string) (int64, error) {
	raw := strings.Trim(strings.TrimSpace(header), `"`)
	raw = strings.TrimPrefix(raw, "W/")
	raw = strings.Trim(raw, `"`)
	if raw == "" || raw == "*" {
		return workspace.AnyVersion, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, BadRequest("If-Match must be a file version number (0 = create only), got %q", raw)
	}
	return n, nil
}
