// Package bustest starts a real embedded NATS server with JetStream for tests.
package bustest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// Server starts an embedded JetStream server listening on a random loopback port (so that
// separate connections, and separate processes, can reach it) and stops it at cleanup.
func Server(t testing.TB) (*server.Server, bus.Dialer) {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start embedded nats: %v", err)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns, bus.Dialer{URL: ns.ClientURL()}
}

// Connect connects to the server behind d as name and opens its JetStream; the connection
// closes at cleanup.
func Connect(t testing.TB, d bus.Dialer, name string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := d.Connect(name)
	if err != nil {
		t.Fatalf("connect to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}
