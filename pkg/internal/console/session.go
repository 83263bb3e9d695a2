package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sort"
	"time"

	"github.com/gorilla/securecookie"
)

const (
	sessionCookie = "mate_console"
	langCookie    = "mate_console_lang"
	// sessionTTL is how long a sign-in lasts.
	sessionTTL = 12 * time.Hour
)

// session is what the console keeps in its cookie. The cookie is encrypted (AES-256-CTR) and
// authenticated (HMAC-SHA256) by securecookie with keys every API replica derives from the
// same configuration, so any replica serves any request and nothing is stored server-side.
// It holds the API key itself: each request authenticates it again with the REST API's
// Authenticator, so a key removed from the configuration ends its sessions at once.
type session struct {
	ID     string `json:"i"`
	Key    string `json:"k,omitempty"`
	Issued int64  `json:"t"`
}

// sessions encodes and decodes session cookies and derives CSRF tokens from them.
type sessions struct {
	codec *securecookie.SecureCookie
	csrf  []byte
	now   func() time.Time
}

// sessionSecret derives the cookie keys. With API keys configured it is a hash of them (the
// same on every replica, rotated with the keys); without keys (loopback development mode,
// one process) it is random per process.
func sessionSecret(keys []string) []byte {
	if len(keys) == 0 {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return b
	}
	ks := append([]string(nil), keys...)
	sort.Strings(ks)
	m := hmac.New(sha256.New, []byte("matememory console session v1"))
	for _, k := range ks {
		m.Write([]byte(k))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func newSessions(secret []byte, now func() time.Time) *sessions {
	c := securecookie.New(derive(secret, "hash"), derive(secret, "block"))
	c.SetSerializer(securecookie.JSONEncoder{})
	c.MaxAge(int(sessionTTL / time.Second))
	return &sessions{codec: c, csrf: derive(secret, "csrf"), now: now}
}

func randomID() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// read returns the request's session, if it carries a valid, unexpired one.
func (s *sessions) read(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	var ss session
	if err := s.codec.Decode(sessionCookie, c.Value, &ss); err != nil || ss.ID == "" {
		return session{}, false
	}
	if s.now().Sub(time.Unix(ss.Issued, 0)) > sessionTTL {
		return session{}, false
	}
	return ss, true
}

// write sets the session cookie: HttpOnly, SameSite=Strict, Secure on TLS, scoped to the
// console's path.
func (s *sessions) write(w http.ResponseWriter, r *http.Request, ss session) error {
	v, err := s.codec.Encode(sessionCookie, ss)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: v, Path: Prefix + "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	return nil
}

func (s *sessions) clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix + "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
}

// token is the CSRF token of a session: an HMAC of its id, so it needs no storage and
// changes with every sign-in.
func (s *sessions) token(ss session) string {
	m := hmac.New(sha256.New, s.csrf)
	m.Write([]byte(ss.ID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *sessions) validToken(ss session, got string) bool {
	want := s.token(ss)
	return got != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
