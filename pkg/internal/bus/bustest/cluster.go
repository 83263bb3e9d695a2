package bustest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// Cluster is a real three-node (or n-node) JetStream cluster on loopback, with routes,
// whose nodes can be killed and restarted with their stores intact.
type Cluster struct {
	t       testing.TB
	dir     string
	clients []int
	routes  []int
	Nodes   []*server.Server
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartCluster starts n JetStream nodes routed to each other and waits for a meta leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, dir: t.TempDir(), Nodes: make([]*server.Server, n)}
	for i := 0; i < n; i++ {
		c.clients = append(c.clients, freePort(t))
		c.routes = append(c.routes, freePort(t))
	}
	t.Cleanup(func() {
		for _, ns := range c.Nodes {
			if ns != nil {
				ns.Shutdown()
				ns.WaitForShutdown()
			}
		}
	})
	for i := 0; i < n; i++ {
		c.Nodes[i] = c.startFirst(i)
	}
	c.WaitReady(30 * time.Second)
	return c
}

// startFirst starts node i for the first time. A port from freePort can be taken by another
// socket (an outgoing connection's ephemeral port, on a busy machine) before the server
// binds it; then the node gets new ports and another try. Restart keeps a node's ports.
func (c *Cluster) startFirst(i int) *server.Server {
	for attempt := 1; ; attempt++ {
		ns, err := c.try(i, 15*time.Second)
		if err == nil {
			return ns
		}
		if attempt == 3 {
			c.t.Fatalf("start node %d: %v", i+1, err)
		}
		c.clients[i], c.routes[i] = freePort(c.t), freePort(c.t)
	}
}

func (c *Cluster) start(i int) *server.Server {
	ns, err := c.try(i, 20*time.Second)
	if err != nil {
		c.t.Fatalf("start node %d: %v", i+1, err)
	}
	return ns
}

func (c *Cluster) try(i int, ready time.Duration) (*server.Server, error) {
	var routes []string
	for j, p := range c.routes {
		if j != i {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	opts := &server.Options{
		ServerName: fmt.Sprintf("n%d", i+1),
		Host:       "127.0.0.1",
		Port:       c.clients[i],
		JetStream:  true,
		StoreDir:   filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)),
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
		Cluster: server.ClusterOpts{
			Name: "matememory-test",
			Host: "127.0.0.1",
			Port: c.routes[i],
		},
		Routes: server.RoutesFromStr(strings.Join(routes, ",")),
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(ready) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("not ready for connections on 127.0.0.1:%d within %s", c.clients[i], ready)
	}
	return ns, nil
}

// URL is the comma-separated client URL list of every node.
func (c *Cluster) URL() string {
	var urls []string
	for _, p := range c.clients {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(urls, ",")
}

// Dialer connects to the cluster (any node).
func (c *Cluster) Dialer() bus.Dialer { return bus.Dialer{URL: c.URL()} }

// Kill stops node i abruptly (its store stays on disk).
func (c *Cluster) Kill(i int) {
	if ns := c.Nodes[i]; ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		c.Nodes[i] = nil
	}
}

// Restart starts node i again on the same ports and store.
func (c *Cluster) Restart(i int) {
	c.Kill(i)
	c.Nodes[i] = c.start(i)
}

// WaitReady waits until JetStream answers account info through the cluster.
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		nc, err := nats.Connect(c.URL(), nats.Timeout(2*time.Second))
		if err == nil {
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			nc.Close()
			if err == nil {
				return
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	c.t.Fatalf("cluster not ready after %s: %v", timeout, last)
}
