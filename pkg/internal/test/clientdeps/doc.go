// Package clientdeps holds what a chat service takes on when it imports MateMemory's client
// libraries: pkg/client (the Go client), pkg/api (the wire types it shares with the server),
// pkg/event (the event contract) and pkg/eventpub (the JetStream publisher). go mod tidy
// reads the tests of every package a program builds, so the tests of those packages, and of
// the MateMemory packages they import, count as much as their code: a test there importing
// the server puts the whole server in every chat service's module graph. Such tests live in
// pkg/internal/test/goclient and pkg/internal/test/eventpub instead.
//
//	go test ./pkg/internal/test/clientdeps -v    # measures the downloads of each library
package clientdeps
