package bus

import (
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Auth is how this process authenticates to NATS and, for the embedded server, what its TCP
// listener requires of clients (mate.nats.user/password, nkey-seed-file, creds-file, tls.*).
type Auth struct {
	User     string
	Password string
	// NKeySeedFile holds an NKEY user seed (SU...). The embedded listener accepts its public key.
	NKeySeedFile string
	// CredsFile is a JWT user credentials file (external clusters with decentralised auth).
	CredsFile string
	// TLS: for a client, CAFile is the CA to trust and CertFile/KeyFile a client certificate;
	// for the embedded listener, CertFile/KeyFile are its certificate and CAFile, when set,
	// verifies client certificates.
	CertFile, KeyFile, CAFile string
}

// Required reports whether the settings make a listener require credentials.
func (a Auth) Required() bool { return a.User != "" || a.NKeySeedFile != "" }

// clientOptions are the nats.go options that present these credentials.
func (a Auth) clientOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("mate.nats.nkey-seed-file %s: %w", a.NKeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if a.CredsFile != "" {
		if _, err := os.Stat(a.CredsFile); err != nil {
			return nil, fmt.Errorf("mate.nats.creds-file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	if a.CAFile != "" {
		opts = append(opts, nats.RootCAs(a.CAFile))
	}
	if a.CertFile != "" {
		opts = append(opts, nats.ClientCert(a.CertFile, a.KeyFile))
	}
	return opts, nil
}

// serverOptions applies the listener's requirements to an embedded server's options.
func (a Auth) serverOptions(opts *server.Options) error {
	if a.User != "" {
		opts.Users = []*server.User{{Username: a.User, Password: a.Password}}
	}
	if a.NKeySeedFile != "" {
		pub, err := publicKeyOfSeed(a.NKeySeedFile)
		if err != nil {
			return err
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	if a.CertFile != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: a.CertFile, KeyFile: a.KeyFile,
			CaFile: a.CAFile, Verify: a.CAFile != ""})
		if err != nil {
			return fmt.Errorf("embedded nats: mate.nats.tls: %w", err)
		}
		opts.TLSConfig = tc
		opts.TLS = true
		opts.TLSVerify = a.CAFile != ""
		opts.AllowNonTLS = false
	}
	return nil
}

func publicKeyOfSeed(file string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("mate.nats.nkey-seed-file: %w", err)
	}
	// A bare seed or a decorated one (the format nsc writes), as nats.NkeyOptionFromSeed reads it.
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return "", fmt.Errorf("mate.nats.nkey-seed-file %s: %w", file, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}
