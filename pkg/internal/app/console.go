package app

import (
	"context"
	"net/http"
	"strings"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/console"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"github.com/matememory/matememory/pkg/internal/window"
)

// apiParts are the services the API routes and the console share.
type apiParts struct {
	summarize summarizer.API
	emergence *emergence.Trigger
	cron      *cronjob.Service
	window    *window.Service
	// leases is the API process's binding of the lease bucket: the pending view reads it,
	// the erasure takes an agent's lease (apiLeases binds it once).
	leases *lease.Manager
}

// apiLeases binds the per-agent lease bucket once for the API process's parts.
func (a *App) apiLeases(ctx context.Context) (*lease.Manager, error) {
	if a.parts.leases != nil {
		return a.parts.leases, nil
	}
	m := a.Cfg.Mate
	l, err := lease.Bucket(ctx, a.JS, bus.BucketLease, config.Seconds(m.Memory.LeaseTTLSeconds), m.NATS.Replicas, owner("api"))
	if err != nil {
		return nil, err
	}
	a.parts.leases = l
	return l, nil
}

// buildConsole builds the web console on API processes: the same services and key scopes
// as the REST API (docs/console.md).
func (a *App) buildConsole() error {
	if !a.Has(TargetAPI) {
		return nil
	}
	m := a.Cfg.Mate
	keys := make([]string, 0, len(m.Auth.Keys))
	for _, k := range m.Auth.Keys {
		keys = append(keys, k.Key)
	}
	d := console.Deps{Auth: httpapi.NewAuthenticator(m.Auth.Keys), Keys: keys, Workspace: a.Workspace,
		Ledger: ledger.New(a.DB, a.Now), Blame: a.Blame, JS: a.JS, Language: m.Language, Now: a.Now, Log: a.Log}
	if a.parts.cron != nil {
		d.Cron = a.parts.cron
	}
	if a.Erasure != nil {
		d.Erase = a.Erasure
	}
	if a.parts.emergence != nil {
		d.Emergence = a.parts.emergence
	}
	if a.parts.window != nil {
		d.Window = a.parts.window
	}
	if a.Recall != nil {
		d.Search = a.Recall
	}
	if a.Bundle != nil {
		d.Export = a.Bundle
	}
	if a.parts.summarize.Publisher != nil {
		d.Summarize = a.parts.summarize
	}
	if a.parts.summarize.Pending != nil {
		d.Pending = a.parts.summarize.Pending
	}
	c, err := console.New(d)
	if err != nil {
		return err
	}
	a.Console = c
	return nil
}

// Handler is the process's HTTP handler: the console under /console (and / sent there) on
// API processes, everything else the REST server.
func (a *App) Handler() http.Handler {
	if a.Console == nil {
		return a.HTTP
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == console.Prefix || strings.HasPrefix(r.URL.Path, console.Prefix+"/"):
			a.Console.ServeHTTP(w, r)
		case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, console.Prefix+"/", http.StatusFound)
		default:
			a.HTTP.ServeHTTP(w, r)
		}
	})
}
