// Package goclient holds the tests of the Go client (pkg/client) against the real service
// (pkg/internal/app with embedded NATS and SQLite), every response held against the OpenAPI document.
// They live here rather than in pkg/client because go mod tidy reads the tests of every
// package a program builds: tests there importing pkg/internal/app put the whole server (104
// modules, about 1 GB) in the module graph of every chat service that imports the client.
// pkg/client keeps its own tests that need only the standard library; pkg/internal/test/clientdeps
// holds the rule.
package goclient
