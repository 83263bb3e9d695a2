package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

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

// StatusCoder lets errors from feature packages choose their HTTP status.
type StatusCoder interface{ HTTPStatus() int }

// Classify maps an error to a status and a message; the mapping lives here only.
func Classify(err error) (int, string) {
	var he *Error
	var sc StatusCoder
	switch {
	case errors.As(err, &he):
		return he.Status, he.Msg
	case errors.As(err, &sc):
		return sc.HTTPStatus(), err.Error()
	case errors.Is(err, workspace.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, workspace.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, workspace.ErrConflict):
		return http.StatusConflict, err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timed out: " + err.Error()
	case errors.Is(err, context.Canceled):
		return 499, "request canceled"
	}
	return http.StatusInternalServerError, err.Error()
}

// MaxBodyBytes bounds request bodies (file content limit plus JSON overhead).
const MaxBodyBytes = 8 << 20

// Decode reads a JSON body into v, rejecting unknown fields and trailing data.
func Decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			return BadRequest("request body is empty; expected a JSON object")
		case errors.As(err, &mbe):
			return Errorf(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", MaxBodyBytes)
		}
		return BadRequest("invalid JSON body: %v", err)
	}
	if dec.More() {
		return BadRequest("invalid JSON body: more than one JSON value")
	}
	return nil
}

// PathInt64 parses a positive integer path parameter.
func PathInt64(r *http.Request, name string) (int64, error) {
	raw := r.PathValue(name)
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n <= 0 {
		return 0, BadRequest("%s must be a positive integer, got %q", name, raw)
	}
	return n, nil
}

// IfMatch reads an If-Match: <version> header; absent means workspace.AnyVersion.
func IfMatch(r *http.Request) (int64, error) { return ParseIfMatch(r.Header.Get("If-Match")) }

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
