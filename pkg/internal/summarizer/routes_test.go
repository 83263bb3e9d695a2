package summarizer

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// registerRoutes serves the pipeline's routes and the dead-letter routes on a test server.
// The routes live in the REST port (pkg/internal/rest), which imports this package, so the
// in-package tests cannot import it: rest_test.go, an external test file of this package,
// sets it before any test runs.
var registerRoutes func(s *httpapi.Server, api API, js jetstream.JetStream)

// SetRoutes is how rest_test.go sets registerRoutes.
func SetRoutes(f func(s *httpapi.Server, api API, js jetstream.JetStream)) { registerRoutes = f }
