package storetest

import (
	"net"
	"sync"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
)

// Proxy is a TCP proxy that can freeze its connections: while frozen, bytes stop flowing in
// both directions and nothing is reset, as with a network that drops packets silently.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
}

// NewProxy forwards a loopback port to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		p.Thaw()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, u)
			mu.Unlock()
			conns.Add(2)
			go func() { defer conns.Done(); p.pump(u, c) }()
			go func() { defer conns.Done(); p.pump(c, u) }()
		}
	}()
	return p
}

func (p *Proxy) pump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops every byte until Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Thaw lets bytes flow again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Via opens db (a MySQL test database) again through a Proxy, with opts.
func Via(t testing.TB, db DB, opts ...store.Option) (*gorm.DB, *Proxy) {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr()
	gdb, err := store.Open("mysql", cfg.FormatDSN(), "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(gdb) })
	return gdb, p
}
