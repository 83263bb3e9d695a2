package app_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
)

// Issue 9.5: a client trickling its body is cut off after the read timeout, and an idle
// keep-alive connection is closed after the idle timeout.
func TestSlowAndIdleClientsAreCutOff(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.SyncAlways = false
	cfg.Mate.HTTP.ReadTimeoutSeconds = 1
	cfg.Mate.HTTP.IdleTimeoutSeconds = 1
	a, err := app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Trickle: 1 byte every 200 ms of a 100-byte body.
	c, err := net.Dial("tcp", a.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, _ = io.WriteString(c, "POST /api/v1/agents/1/tools/list_workspace_memory_files HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
	closed := make(chan time.Duration, 1)
	go func() {
		_, _ = io.Copy(io.Discard, c)
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < 50; i++ {
		select {
		case d := <-closed:
			if d > 4*time.Second {
				t.Fatalf("the trickling client was cut off only after %s", d)
			}
			goto idle
		case <-tick.C:
			if _, err := c.Write([]byte(" ")); err != nil {
				goto idle
			}
		}
	}
	t.Fatal("a client trickling its body held the connection for 10 s")

idle:
	// Idle keep-alive: one request, then silence; the server closes the connection.
	ic, err := net.Dial("tcp", a.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	_, _ = io.WriteString(ic, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(ic)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = ic.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the idle keep-alive connection was not closed by the server: %v", err)
	}
}
