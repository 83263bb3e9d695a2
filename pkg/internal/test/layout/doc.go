// Package layout holds the code's layout to the rules of docs/architecture.md ("Layout:
// where does a change go"): a feature's core imports no net/http, NATS or gorm, and the
// public packages (pkg/event, pkg/eventpub, pkg/client, pkg/api, pkg/app) export only what
// their outside users need. What a program importing a public library downloads is
// pkg/internal/test/clientdeps's. The tests read the tree with go list and go/parser only.
package layout
