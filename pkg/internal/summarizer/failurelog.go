package summarizer

import "time"

// Failed runs are logged at WARN at most failureLogBurst at once, then one per
// failureLogInterval (with the number left out), so an LLM down for an hour shows at once
// without a line per retry.
const (
	failureLogInterval = 30 * time.Second
	failureLogBurst    = 5
)
