package app_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
)

func natsApp(t *testing.T, set func(*config.NATS)) (*app.App, error) {
	t.Helper()
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.SyncAlways = false
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.NATS.EmbeddedListen = "127.0.0.1:0"
	set(&cfg.Mate.NATS)
	a, err := app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	t.Cleanup(a.Close)
	return a, a.Start(context.Background())
}

// Issue 9.1: the embedded listener requires the configured credentials; the service's own
// connections present them, so the pipeline works; anonymous clients are refused.
func TestEmbeddedNATSListenerRequiresCredentials(t *testing.T) {
	a, err := natsApp(t, func(n *config.NATS) { n.User, n.Password = "mate", "s3cret-nats-password" })
	if err != nil {
		t.Fatal(err)
	}
	url := a.Embedded.ClientURL()
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("an anonymous client was accepted by the embedded listener")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("anonymous: %v", err)
	}
	if nc, err := nats.Connect(url, nats.UserInfo("mate", "wrong")); err == nil {
		nc.Close()
		t.Fatal("a wrong password was accepted")
	}
	nc, err := nats.Connect(url, nats.UserInfo("mate", "s3cret-nats-password"))
	if err != nil {
		t.Fatalf("the configured user was refused: %v", err)
	}
	nc.Close()
	// The service's own connection works: an event is stored.
	r := do(t, "POST", "http://"+a.Addr+"/api/v1/events/conversation-completed", "",
		`{"eventId":"e1","agentId":1,"conversationId":"c1","userMessage":"hello there, how are you?","assistantReply":"fine","messageCount":2,"triggerSource":"web"}`,
		"Content-Type", "application/json")
	if r.status != 202 {
		t.Fatalf("event through the authenticated service connection: %d %s", r.status, r.Msg)
	}
}

// A listener that is not loopback is refused without credentials, whatever the config
// validation let through (a caller building the config by hand).
func TestEmbeddedNATSRefusesOpenNonLoopbackListener(t *testing.T) {
	_, err := natsApp(t, func(n *config.NATS) { n.EmbeddedListen = "0.0.0.0:0" })
	if err == nil || !strings.Contains(err.Error(), "without credentials") {
		t.Fatalf("an open 0.0.0.0 listener: %v", err)
	}
	if _, err := natsApp(t, func(n *config.NATS) {
		n.EmbeddedListen = "0.0.0.0:0"
		n.User, n.Password = "mate", "s3cret-nats-password"
	}); err != nil {
		t.Fatalf("0.0.0.0 with credentials: %v", err)
	}
}

// NKEY and TLS: the listener accepts the seed's public key over TLS only.
func TestEmbeddedNATSNKeyAndTLS(t *testing.T) {
	dir := t.TempDir()
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := selfSigned(t, dir)
	a, err := natsApp(t, func(n *config.NATS) {
		n.NKeySeedFile = seedFile
		n.TLS = config.NATSTLS{CertFile: cert, KeyFile: key}
	})
	if err != nil {
		t.Fatal(err)
	}
	url := a.Embedded.ClientURL()
	nkOpt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(url, nats.RootCAs(cert), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("an anonymous TLS client was accepted")
	}
	nc, err := nats.Connect(url, nats.RootCAs(cert), nkOpt)
	if err != nil {
		t.Fatalf("the NKEY user over TLS was refused: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("the connection is not TLS")
	}
	nc.Close()
	r := do(t, "POST", "http://"+a.Addr+"/api/v1/events/conversation-completed", "",
		`{"eventId":"e1","agentId":1,"conversationId":"c1","userMessage":"hello there, how are you?","assistantReply":"fine","messageCount":2,"triggerSource":"web"}`,
		"Content-Type", "application/json")
	if r.status != 202 {
		t.Fatalf("event through the NKEY/TLS service connection: %d %s", r.status, r.Msg)
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(priv)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startListening runs the all-in-one app on dataDir with the embedded NATS listener on a free
// loopback port, keys in MATE_AUTH_KEYS syntax ("" = none); the caller closes it.
func startListening(t *testing.T, dataDir, keys string, log io.Writer, set func(*config.NATS)) *app.App {
	t.Helper()
	cfg := config.Default()
	cfg.Mate.DataDir = dataDir
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.SyncAlways = false
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.NATS.EmbeddedListen = "127.0.0.1:0"
	if keys != "" {
		k, err := config.ParseKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Mate.Auth.Keys = k
	}
	if set != nil {
		set(&cfg.Mate.NATS)
	}
	a, err := app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		a.Close()
		t.Fatal(err)
	}
	return a
}

// readCredentials parses the generated credentials file.
func readCredentials(t *testing.T, file string) map[string]string {
	t.Helper()
	st, err := os.Stat(file)
	if err != nil {
		t.Fatalf("the generated credentials: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", file, st.Mode().Perm())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			kv[k] = v
		}
	}
	if kv["NATS_USER"] == "" || len(kv["NATS_PASSWORD"]) < 20 || kv["NATS_URL"] == "" {
		t.Fatalf("%s: user, password (20 characters or more) and URL expected:\n%s", file, raw)
	}
	return kv
}

// Issue 23.2: with API keys set, the embedded listener on loopback requires credentials
// (the configured ones, or a generated password in a 0600 file the log names, never the
// password itself), and the service's own connections still work; without keys the loopback
// listener stays open for development.
func TestEmbeddedNATSListenerOnLoopbackWithAPIKeys(t *testing.T) {
	const key = "agent-key-0123456789"
	cases := []struct {
		name      string
		keys      string
		set       func(*config.NATS)
		anonymous bool // an anonymous client is accepted
		generated bool // the credentials are generated into the data dir
		user, pw  string
	}{
		{name: "no keys: open for development", anonymous: true},
		{name: "keys and configured credentials", keys: key + "=1",
			set: func(n *config.NATS) { n.User, n.Password = "chat", "configured-password-0123" }, user: "chat", pw: "configured-password-0123"},
		{name: "keys without credentials: generated", keys: key + "=1", generated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, app.NATSCredentialsFile)
			// A file left by an earlier run must not survive where it opens nothing.
			if err := os.WriteFile(file, []byte("NATS_USER=old\nNATS_PASSWORD=stale-password-0123456789\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			a := startListening(t, dir, tc.keys, &logs, tc.set)
			defer a.Close()
			url := a.Embedded.ClientURL()

			nc, err := nats.Connect(url, nats.MaxReconnects(0))
			if tc.anonymous {
				if err != nil {
					t.Fatalf("without API keys the loopback listener refused an anonymous client: %v", err)
				}
				nc.Close()
			} else {
				if err == nil {
					nc.Close()
					t.Fatal("with API keys set, an anonymous client was accepted by the embedded listener")
				}
				if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
					t.Fatalf("anonymous: %v", err)
				}
			}
			if tc.generated {
				kv := readCredentials(t, file)
				if kv["NATS_URL"] != url || a.NATSCredentialsFile != file {
					t.Fatalf("credentials file %s (app says %q) names %s, the listener is %s", file, a.NATSCredentialsFile, kv["NATS_URL"], url)
				}
				tc.user, tc.pw = kv["NATS_USER"], kv["NATS_PASSWORD"]
				if !strings.Contains(logs.String(), file) || !strings.Contains(a.Banner(), file) {
					t.Errorf("neither the log nor the banner names %s:\n%s\n%s", file, logs.String(), a.Banner())
				}
				if strings.Contains(logs.String(), tc.pw) || strings.Contains(a.Banner(), tc.pw) {
					t.Error("the generated password is in the log or the banner")
				}
			} else if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s kept or written although nothing is generated: %v", file, err)
			}
			if tc.user == "" {
				return
			}
			if nc, err := nats.Connect(url, nats.UserInfo(tc.user, "wrong-password"), nats.MaxReconnects(0)); err == nil {
				nc.Close()
				t.Fatal("a wrong password was accepted")
			}
			nc, err = nats.Connect(url, nats.UserInfo(tc.user, tc.pw), nats.MaxReconnects(0))
			if err != nil {
				t.Fatalf("the listener refused its credentials: %v", err)
			}
			defer nc.Close()
			sub, err := nc.SubscribeSync("mate.conversation.completed.>")
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			// The service's own (in-process) connections still publish: the event is seen.
			r := do(t, "POST", "http://"+a.Addr+"/api/v1/events/conversation-completed", key,
				`{"eventId":"e1","agentId":1,"conversationId":"c1","userMessage":"hello there, how are you?","assistantReply":"fine","messageCount":2,"triggerSource":"web"}`)
			if r.status != 202 {
				t.Fatalf("event through the service's connection: %d %s", r.status, r.Msg)
			}
			if m, err := sub.NextMsg(10 * time.Second); err != nil || m.Subject != "mate.conversation.completed.1" {
				t.Fatalf("the authenticated client did not see the event: %v %v", m, err)
			}
		})
	}
}

// The generated password is kept across restarts (chat services configured with it keep
// working) and replaced when its file was readable by others.
func TestGeneratedNATSCredentialsKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, app.NATSCredentialsFile)
	start := func() (map[string]string, string) {
		a := startListening(t, dir, "agent-key-0123456789=1", io.Discard, nil)
		defer a.Close()
		kv := readCredentials(t, file)
		nc, err := nats.Connect(a.Embedded.ClientURL(), nats.UserInfo(kv["NATS_USER"], kv["NATS_PASSWORD"]), nats.MaxReconnects(0))
		if err != nil {
			t.Fatalf("the generated credentials: %v", err)
		}
		nc.Close()
		return kv, a.Embedded.ClientURL()
	}
	first, _ := start()
	second, url := start()
	if second["NATS_PASSWORD"] != first["NATS_PASSWORD"] || second["NATS_URL"] != url {
		t.Fatalf("after a restart: password kept %v, URL %s for a listener on %s",
			second["NATS_PASSWORD"] == first["NATS_PASSWORD"], second["NATS_URL"], url)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	third, _ := start()
	if third["NATS_PASSWORD"] == first["NATS_PASSWORD"] {
		t.Fatal("a password whose file others could read was kept")
	}
}
