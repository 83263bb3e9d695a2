package summarizer_test

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// The in-package tests serve the routes of the REST port, which they cannot import.
func init() {
	summarizer.SetRoutes(func(s *httpapi.Server, api summarizer.API, js jetstream.JetStream) {
		rest.RegisterPipeline(s, api)
		rest.RegisterDeadLetters(s, js, tracing.Messaging{})
	})
}
