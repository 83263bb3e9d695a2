package window

import (
	"errors"
	"fmt"

	"github.com/matememory/matememory/pkg/internal/fault"
)

// InvalidError is a request the service cannot serve as given: fault's one invalid-input
// error.
type InvalidError = fault.Invalid

func invalidf(format string, args ...any) error { return fault.Invalidf(format, args...) }

// TooLargeError says the system prompt and the current message alone exceed the budget, so
// no amount of compaction can make the request fit. It matches fault.ErrTooLarge.
type TooLargeError struct {
	System, Workspace, Current, Priming, Budget int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the system prompt (%d tokens, of which the workspace files take %d) and the current user message (%d tokens) need %d tokens with the reply priming, more than maxInputTokens %d: shorten the system prompt or the message, disable large workspace files, or raise maxInputTokens",
		e.System, e.Workspace, e.Current, e.System+e.Current+e.Priming, e.Budget)
}

// Is makes errors.Is(err, fault.ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == fault.ErrTooLarge }

// DataError is stored data the service cannot use (a corrupt row); it is a server-side
// problem the operator must fix (500 with the row named).
type DataError struct{ Msg string }

func (e *DataError) Error() string { return e.Msg }

// errNoLLM degrades compaction when no endpoint is configured.
// errPreviewUncached: a preview needs a summary the cache does not hold (it never asks the
// model).
var errPreviewUncached = errors.New("preview: the summary is not cached")

var errNoLLM = errors.New("no LLM endpoint is configured (set OPENAI_BASE_URL and OPENAI_API_KEY)")
