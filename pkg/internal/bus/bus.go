// Package bus connects MateMemory to NATS JetStream: it starts the embedded server used by
// the all-in-one mode and tests, opens client connections, and names the subjects, streams
// and buckets every process agrees on.
package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/matememory/matememory/pkg/internal/config"
)

// EmbeddedOptions configures an in-process NATS server with JetStream.
type EmbeddedOptions struct {
	// StoreDir is where JetStream keeps its files.
	StoreDir string
	// Listen is host:port to accept TCP clients on; empty opens no port (in-process only).
	// A port of 0 picks a free one.
	Listen string
	// SyncAlways fsyncs every write before the publish is acknowledged (DESIGN.md §8).
	SyncAlways bool
	// ServerName names the server (must be unique within a cluster).
	ServerName string
	// Auth is what the listener requires of clients (and what in-process connections
	// present). A listener that is not loopback is refused without credentials.
	Auth Auth
}

// StartEmbedded starts a NATS server with JetStream in this process.
func StartEmbedded(o EmbeddedOptions) (*server.Server, error) {
	if o.StoreDir == "" {
		return nil, errors.New("embedded nats: a store directory is required")
	}
	// The store holds every event (messages included): its owner's only.
	if err := os.MkdirAll(o.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded nats: create store dir: %w", err)
	}
	if err := os.Chmod(o.StoreDir, 0o700); err != nil { // one an earlier version made 0755
		return nil, fmt.Errorf("embedded nats: make the store dir private (mode 0700): %w", err)
	}
	opts := &server.Options{
		ServerName: o.ServerName,
		JetStream:  true,
		StoreDir:   filepath.Clean(o.StoreDir),
		SyncAlways: o.SyncAlways,
		NoSigs:     true,
		NoLog:      true,
	}
	if opts.ServerName == "" {
		opts.ServerName = "matememory-embedded"
	}
	if err := o.Auth.serverOptions(opts); err != nil {
		return nil, err
	}
	if o.Listen == "" {
		opts.DontListen = true
	} else {
		if !o.Auth.Required() && !config.LoopbackOnly(o.Listen) {
			return nil, fmt.Errorf("embedded nats: refusing to listen on %s without credentials: anyone reaching it could read every agent's conversations and publish events; set mate.nats.user and mate.nats.password (or mate.nats.nkey-seed-file), or listen on 127.0.0.1", o.Listen)
		}
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen %q: %w", o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen port %q: %w", port, err)
		}
		opts.Host = host
		opts.Port = p
		if p == 0 {
			opts.Port = server.RANDOM_PORT
		} else {
			// The server would only log a taken port and never become ready: say so now.
			ln, err := net.Listen("tcp", o.Listen)
			if err != nil {
				return nil, fmt.Errorf("embedded nats: cannot listen on %s: %w", o.Listen, err)
			}
			_ = ln.Close()
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats: not ready after 15s")
	}
	return ns, nil
}

// Dialer opens NATS connections either to an in-process server or to URLs.
type Dialer struct {
	// Server, when set, is used through an in-process connection.
	Server *server.Server
	// URL is a NATS URL or a comma-separated list (a cluster).
	URL string
	// Auth is presented on every connection.
	Auth Auth
}

// Connect opens a new connection. Each subscriber and publisher should own its connection:
// watermill's Subscriber.Close drains it and Publisher.Close closes it (DESIGN.md §8).
func (d Dialer) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}, extra...)
	auth, err := d.Auth.clientOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth...)
	if d.Server != nil {
		opts = append(opts, nats.InProcessServer(d.Server))
		if d.Auth.CertFile != "" && d.Auth.CAFile == "" {
			// The embedded server's own (maybe self-signed) certificate is the one to trust.
			opts = append(opts, nats.RootCAs(d.Auth.CertFile))
		}
		nc, err := nats.Connect("", opts...)
		if err != nil {
			return nil, fmt.Errorf("connect to embedded nats: %w", err)
		}
		return nc, nil
	}
	url := strings.TrimSpace(d.URL)
	if url == "" {
		return nil, errors.New("nats: no URL and no embedded server")
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", url, err)
	}
	return nc, nil
}
