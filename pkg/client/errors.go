package client

import (
	"errors"
	"net/http"
)

// Sentinel errors for errors.Is: an *APIError matches the one of its status.
var (
	// ErrBadRequest: 400, the request is invalid and will stay so; the message says why.
	ErrBadRequest = errors.New("matememory: bad request")
	// ErrUnauthorized: 401, the API key is missing or unknown.
	ErrUnauthorized = errors.New("matememory: unauthorized")
	// ErrForbidden: 403, the key may not act for that agent (or needs admin).
	ErrForbidden = errors.New("matememory: forbidden")
	// ErrNotFound: 404, no such file, conversation, run, cron job or dead letter.
	ErrNotFound = errors.New("matememory: not found")
	// ErrConflict: 409, the file changed since the version sent (re-read and retry), or a
	// create-only write found it there.
	ErrConflict = errors.New("matememory: conflict")
	// ErrTooLarge: 413, the body or the assembled context is over its limit.
	ErrTooLarge = errors.New("matememory: too large")
	// ErrRateLimited: 429; the client already waited Retry-After and retried.
	ErrRateLimited = errors.New("matememory: rate limited")
	// ErrUnavailable: 502, 503 or 504 (JetStream or the database briefly unavailable).
	ErrUnavailable = errors.New("matememory: unavailable")
)

// Is makes errors.Is(err, client.ErrNotFound) and the other sentinels work.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Status == http.StatusBadRequest
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout
	}
	return false
}
