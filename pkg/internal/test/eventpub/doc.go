// Package eventpub holds the tests of pkg/eventpub and pkg/internal/tracing that need a real JetStream
// server. They live here rather than next to the code because chat services import those
// packages, and go mod tidy reads the tests of every package a program builds: a test there
// importing nats-server (through pkg/internal/bus) would make every chat service download the server
// and its dependencies. pkg/internal/test/clientdeps holds that rule.
package eventpub
