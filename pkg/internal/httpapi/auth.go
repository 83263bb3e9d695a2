package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/matememory/matememory/pkg/internal/config"
)

// Principal is the authenticated caller.
type Principal struct {
	// Open is true when no keys are configured (loopback-only development mode).
	Open      bool
	Admin     bool
	AllAgents bool
	Agents    map[int64]bool
	// KeyID is a short fingerprint of the key, safe to log.
	KeyID string
}

// MayAct reports whether the caller may act for agentID: read and write its memory (files,
// history, messages, search, context, tools, MCP, export, import, its runs and pending
// view). This is the rule of docs/operations.md#api-keys, the one place that states it:
// the admin scope alone never reaches an agent (its memory, its erasure); it is for the
// operator endpoints (dead letters, the over-budget list, the agents list, every cron job);
// a key that needs both says "admin,*".
func (p Principal) MayAct(agentID int64) bool {
	return p.Open || p.AllAgents || p.Agents[agentID]
}

// actingFor wraps h, an operation on path, so that a caller who may not act for the
// {agentId} in the path is refused (403) before anything else of the request is read:
// every agent route holds the same rule, whatever its handler checks, and the refusal does
// not depend on the body. An id that is no positive integer is left to the operation (400).
func actingFor(path string, h http.Handler) http.Handler {
	if !strings.Contains(path, "{agentId}") {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, err := strconv.ParseInt(r.PathValue("agentId"), 10, 64); err == nil && id > 0 {
			if err := Act(r.Context(), id); err != nil {
				writeErr(w, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller of a request handled by a Server.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// Authenticator checks bearer keys from configuration.
type Authenticator struct {
	keys []authKey
}

type authKey struct {
	hash [32]byte
	p    Principal
}

// NewAuthenticator builds an authenticator from configured keys.
func NewAuthenticator(keys []config.APIKey) *Authenticator {
	a := &Authenticator{}
	for _, k := range keys {
		h := sha256.Sum256([]byte(k.Key))
		p := Principal{Admin: k.Admin, Agents: map[int64]bool{}, KeyID: strconvHex(h[:4])}
		for _, ag := range k.Agents {
			if ag == "*" {
				p.AllAgents = true
				continue
			}
			if n, err := strconv.ParseInt(ag, 10, 64); err == nil {
				p.Agents[n] = true
			}
		}
		a.keys = append(a.keys, authKey{hash: h, p: p})
	}
	return a
}

func strconvHex(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, len(b)*2)
	for _, c := range b {
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

// Enabled reports whether keys are configured.
func (a *Authenticator) Enabled() bool { return len(a.keys) > 0 }

// Authenticate identifies the caller of r.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if !a.Enabled() {
		return Principal{Open: true}, nil
	}
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return Principal{}, &Error{Status: http.StatusUnauthorized,
			Msg:    "missing API key: send Authorization: Bearer <key>",
			Header: http.Header{"Www-Authenticate": {`Bearer realm="matememory"`}}}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	for _, k := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], k.hash[:]) == 1 {
			return k.p, nil
		}
	}
	return Principal{}, &Error{Status: http.StatusUnauthorized, Msg: "invalid API key",
		Header: http.Header{"Www-Authenticate": {`Bearer realm="matememory", error="invalid_token"`}}}
}

// AgentID parses the {agentId} path parameter and checks the caller may act for it.
func AgentID(r *http.Request) (int64, error) {
	id, err := PathInt64(r, "agentId")
	if err != nil {
		return 0, err
	}
	return id, Act(r.Context(), id)
}

// Act checks the caller of ctx may act for agentID (403 otherwise).
func Act(ctx context.Context, agentID int64) error {
	if !PrincipalFrom(ctx).MayAct(agentID) {
		return Errorf(http.StatusForbidden, "this API key may not act for agent %d", agentID)
	}
	return nil
}

// Admin checks the caller of ctx holds an admin key (or keys are off).
func Admin(ctx context.Context) error {
	p := PrincipalFrom(ctx)
	if p.Open || p.Admin {
		return nil
	}
	return Errorf(http.StatusForbidden, "this endpoint needs an admin API key")
}

// AgentPath is the {agentId} path parameter of a typed operation.
type AgentPath struct {
	AgentID int64 `path:"agentId" minimum:"1" example:"1" doc:"The agent's id, a positive integer; the key must be allowed to act for it."`
}
