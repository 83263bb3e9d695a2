package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/matememory/matememory/pkg/app"
	"github.com/matememory/matememory/pkg/config"
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
