package window

import "github.com/matememory/matememory/pkg/internal/httpapi"

// registerRoutes serves the context window routes on a test server. The routes live in the
// REST port (pkg/internal/rest), which imports this package, so the in-package tests cannot
// import it: rest_test.go, an external test file of this package, sets it before any test
// runs.
var registerRoutes func(*httpapi.Server, *Service)

// SetRoutes is how rest_test.go sets registerRoutes.
func SetRoutes(f func(*httpapi.Server, *Service)) { registerRoutes = f }
