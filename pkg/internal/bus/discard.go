package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// DiscardDeadLetter deletes dead letter seq from the dead-letter stream without publishing
// it again (an operator decided it is not worth retrying). ErrDeadLetterNotFound when it is
// not there (already retried or discarded).
func DiscardDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) error {
	s, err := js.Stream(ctx, StreamDLQ)
	if err != nil {
		return fmt.Errorf("open %s: %w", StreamDLQ, err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: seq %d", ErrDeadLetterNotFound, seq)
		}
		return fmt.Errorf("discard dead letter %d: %w", seq, err)
	}
	return nil
}
