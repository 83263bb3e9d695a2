package bus

import (
	"errors"
	"time"
)

// Outcome is what a handler decided about a delivery; the Runtime maps it to JetStream in one
// place (settle): Done acknowledges, RetryAfter NAKs with a delay, Reject stores the message on
// MATE_DLQ and terminates it (or NAKs it when the dead letter cannot be stored: nothing is
// dropped).
type Outcome struct {
	kind   outcomeKind
	Delay  time.Duration
	Reason string
	// Cause labels a dead letter for metrics: CauseInvalid (poison), CausePermanent,
	// CauseExhausted (the last delivery, or the max-deliveries advisory). Empty: the
	// runtime picks permanent or exhausted from the delivery count.
	Cause string
	// Detail is the handler's own result, handed back to its Settled and Finished hooks.
	Detail any
}

type outcomeKind int

const (
	kindAck outcomeKind = iota
	kindRetry
	kindDeadLetter
)

// Causes of a dead letter.
const (
	CauseInvalid   = "invalid"
	CausePermanent = "permanent"
	CauseExhausted = "exhausted"
)

// Action is what the runtime did with a delivery (the label values of the workers' metrics).
type Action string

// Actions.
const (
	ActionAck        Action = "ack"
	ActionNak        Action = "nak"
	ActionDeadLetter Action = "dead_letter"
)

// Done acknowledges the delivery: it is done with.
func Done() Outcome { return Outcome{kind: kindAck} }

// RetryAfter has the message delivered again after delay.
func RetryAfter(delay time.Duration, reason string) Outcome {
	return Outcome{kind: kindRetry, Delay: delay, Reason: reason}
}

// Reject gives the message up as a dead letter, for reason (operators read it in
// Mate-Dlq-Reason).
func Reject(reason string) Outcome { return Outcome{kind: kindDeadLetter, Reason: reason} }

// IsRetry reports whether o asks for a redelivery.
func (o Outcome) IsRetry() bool { return o.kind == kindRetry }

// IsDeadLetter reports whether o gives the message up.
func (o Outcome) IsDeadLetter() bool { return o.kind == kindDeadLetter }

// WithDetail returns o carrying the handler's own result.
func (o Outcome) WithDetail(v any) Outcome {
	o.Detail = v
	return o
}

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying cannot fix (invalid input, a model's 400, an
// answer that is not the contract): OutcomeOf dead-letters it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var pe *permanentError
	return errors.As(err, &pe)
}

// OutcomeOf is the mapping from a handler's error to an outcome: nil acknowledges, a
// Permanent error dead-letters with the error as reason, any other error (transient: the
// network, a database or model down, a lost lease) is retried after b.Delay(attempt).
func OutcomeOf(err error, attempt int, b Backoff) Outcome {
	switch {
	case err == nil:
		return Done()
	case IsPermanent(err):
		return Reject(err.Error())
	default:
		return RetryAfter(b.Delay(attempt), err.Error())
	}
}
