package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// ResourceTemplate is the URI template of the agent's memory files: memory:///MEMORY.md,
// memory:///memory/2026-04-01.md. The filename is the URI's path (the authority is empty),
// never its host: a host cannot hold a percent-encoded byte, so a file named "a b.md" would
// make an invalid URI there.
const ResourceTemplate = "memory:///{+filename}"

// MIMEType of a memory file resource.
const MIMEType = "text/markdown"

// uriPrefix is what every memory file URI starts with; legacyPrefix is the form of the
// versions before the filename moved to the path (memory://MEMORY.md), still read.
const (
	uriPrefix    = "memory:///"
	legacyPrefix = "memory://"
)

// ResourceURI is the URI of a memory file: "memory:///" and the filename, each byte that is
// neither unreserved (RFC 3986: letters, digits, "-", ".", "_", "~") nor the directory
// separator "/" percent-encoded, so that every name the workspace accepts gives a valid URI
// that url.Parse reads back to the same path.
func ResourceURI(filename string) string {
	var b strings.Builder
	b.Grow(len(uriPrefix) + len(filename))
	b.WriteString(uriPrefix)
	for i := 0; i < len(filename); i++ {
		c := filename[i]
		if c < 0x80 && (isAlnum(c) || strings.IndexByte("-._~/", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// resourceName is the filename a memory URI names ("" when it names none). It reads both
// memory:///NAME and the older memory://NAME.
func resourceName(uri string) string {
	rest, ok := strings.CutPrefix(uri, uriPrefix)
	if !ok {
		if rest, ok = strings.CutPrefix(uri, legacyPrefix); !ok {
			return ""
		}
	}
	name, err := url.PathUnescape(rest)
	if err != nil {
		return ""
	}
	return name
}

// canonical rewrites a request's memory://NAME URI (the form before the filename moved to
// the path) to memory:///NAME, so clients that kept the old URIs still read and subscribe.
func canonical(next mcp.MethodHandler) mcp.MethodHandler {
	fix := func(uri *string) {
		if strings.HasPrefix(*uri, uriPrefix) || !strings.HasPrefix(*uri, legacyPrefix) {
			return
		}
		if name := resourceName(*uri); workspace.ValidateName(name) == nil {
			*uri = ResourceURI(name)
		}
	}
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch r := req.(type) {
		case *mcp.ReadResourceRequest:
			if r.Params != nil {
				fix(&r.Params.URI)
			}
		case *mcp.SubscribeRequest:
			if r.Params != nil {
				fix(&r.Params.URI)
			}
		case *mcp.UnsubscribeRequest:
			if r.Params != nil {
				fix(&r.Params.URI)
			}
		}
		return next(ctx, method, req)
	}
}

// resources serves the agent's memory files as MCP resources. The files are registered with
// the SDK server (so that adding or removing one sends notifications/resources/list_changed
// to the sessions that listen), kept in step with the workspace by sync, which runs before
// every resources/list and after every change the owner reports (Server.Changed).
type resources struct {
	s *Server

	mu    sync.Mutex
	known map[string]tool.FileInfo // uri → file
}

func newResources(s *Server) *resources {
	return &resources{s: s, known: map[string]tool.FileInfo{}}
}

func (r *resources) register() {
	desc := "A Markdown memory file of agent %d, by its workspace filename."
	if r.s.opts.Language != "en" {
		desc = "智能体 %d 的一个 Markdown 记忆文件，按工作区文件名。"
	}
	r.s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "memory-file",
		Title:       title(tool.ReadFile, r.s.opts.Language),
		Description: fmt.Sprintf(desc, r.s.agentID),
		URITemplate: ResourceTemplate,
		MIMEType:    MIMEType,
	}, r.read)
	// resources/list answers the workspace as it is now: sync first, then the SDK lists
	// what is registered, with the sizes as they are now.
	r.s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			if err := r.sync(ctx); err != nil {
				return nil, err
			}
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListResourcesResult); ok && err == nil {
				r.mu.Lock()
				for i, rs := range lr.Resources {
					if f, ok := r.known[rs.URI]; ok {
						c := *rs
						c.Size = f.FileSize
						lr.Resources[i] = &c
					}
				}
				r.mu.Unlock()
			}
			return res, err
		}
	})
}

func (r *resources) resource(f tool.FileInfo) *mcp.Resource {
	return &mcp.Resource{
		URI:      ResourceURI(f.Filename),
		Name:     f.Filename,
		Title:    f.Filename,
		MIMEType: MIMEType,
		Size:     f.FileSize,
	}
}

// sync registers the files the workspace has and removes those it no longer has; the SDK
// tells listening sessions when that changed the list.
func (r *resources) sync(ctx context.Context) error {
	out, err := r.s.tools.CallFull(ctx, r.s.agentID, tool.ListFiles, nil)
	if err != nil {
		return err
	}
	list, ok := out.(tool.ListResult)
	if !ok {
		return fmt.Errorf("list files: unexpected result %T", out)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool, len(list.Files))
	for _, f := range list.Files {
		uri := ResourceURI(f.Filename)
		seen[uri] = true
		if _, ok := r.known[uri]; !ok {
			// ResourceURI always parses; the guard keeps a name it got wrong from
			// taking the process down (the SDK panics on a URI it cannot parse).
			if err := r.s.guard.Do("mcp.resources.add", func() { r.s.AddResource(r.resource(f), r.read) },
				"agent", r.s.agentID, "file", f.Filename); err != nil {
				continue
			}
		}
		r.known[uri] = f
	}
	var gone []string
	for uri := range r.known {
		if !seen[uri] {
			gone = append(gone, uri)
			delete(r.known, uri)
		}
	}
	if len(gone) > 0 {
		r.s.RemoveResources(gone...)
	}
	return nil
}

// read answers resources/read for a memory file of the bound agent.
func (r *resources) read(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name := resourceName(uri)
	if err := workspace.ValidateName(name); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s does not name a memory file: %v", uri, err)}
	}
	args, _ := json.Marshal(map[string]string{"filename": name})
	out, err := r.s.tools.CallFull(ctx, r.s.agentID, tool.ReadFile, args)
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	f, ok := out.(tool.ReadResult)
	if !ok {
		return nil, fmt.Errorf("read %s: unexpected result %T", name, out)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: MIMEType, Text: f.Content}}}, nil
}

// subscribe accepts a subscription to a memory file URI (the file need not exist yet).
func (r *resources) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if err := workspace.ValidateName(resourceName(req.Params.URI)); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s does not name a memory file: %v", req.Params.URI, err)}
	}
	return nil
}

// Changed tells the server that a file of its agent changed: sessions listening for the
// resource list hear of a file added or removed, and subscribers of the file get
// notifications/resources/updated. Without sessions it does nothing (resources/list syncs
// anyway).
func (s *Server) Changed(ctx context.Context, filename string) {
	if !s.opts.Notify || !s.hasSessions() {
		return
	}
	if err := s.res.sync(ctx); err != nil && s.opts.Log != nil {
		s.opts.Log.Warn("mcp: resource list sync failed", "agent", s.agentID, "err", err)
	}
	_ = s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: ResourceURI(filename)})
}

func (s *Server) hasSessions() bool {
	for range s.Sessions() {
		return true
	}
	return false
}
