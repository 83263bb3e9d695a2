package workspace

import "context"

// ChangeHook is told, after the transaction committed, that a file of an agent changed
// (written, edited, appended, flagged, rolled back or deleted). It must not block: the
// recall indexer's hook publishes a message and returns. A hook that fails loses nothing:
// the indexer's reconciler finds every change by its update time.
type ChangeHook func(ctx context.Context, agentID int64, filename string, version int64)

// WithChangeHook adds a hook run after every committed change of a file.
func WithChangeHook(h ChangeHook) Option {
	return func(s *Service) { s.changed = append(s.changed, h) }
}

func (s *Service) notifyChanged(ctx context.Context, agentID int64, name string, version int64) {
	for _, h := range s.changed {
		h(ctx, agentID, name, version)
	}
}

// NotifyChanged tells the change hooks that a file changed outside the service's own
// methods (an import wrote it in its transaction), after that change committed.
func (s *Service) NotifyChanged(ctx context.Context, agentID int64, name string, version int64) {
	s.notifyChanged(ctx, agentID, name, version)
}
