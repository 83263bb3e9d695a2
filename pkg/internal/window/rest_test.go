package window_test

import (
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/window"
)

// The in-package tests serve the routes of the REST port, which they cannot import.
func init() { window.SetRoutes(rest.RegisterContext) }
