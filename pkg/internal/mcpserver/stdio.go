package mcpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves the memory tools and resources of agentID as newline-delimited JSON-RPC
// over in and out (os.Stdin and os.Stdout for `api mcp-stdio`) until in ends or ctx is done.
// Nothing but protocol messages is written to out; diagnostics go to log. Changes reported
// to hub (nil: none) for the agent are notified to the client.
func ServeStdio(ctx context.Context, t Caller, agentID int64, language string, hub *Hub, log *slog.Logger, in io.Reader, out io.Writer) error {
	transport := &mcp.IOTransport{Reader: readCloser(in), Writer: writeCloser(out)}
	s := New(t, agentID, Options{Language: language, Transport: Stdio, Notify: true, Log: log})
	hub.Add(s)
	defer func() {
		// The caller closes the database when this returns: no notification may still read it.
		hub.Remove(s)
		s.Drain()
	}()
	err := s.Run(ctx, transport)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE) || errors.Is(err, context.Canceled) {
		// The client went away (closed our stdin or stdout) or the process is stopping: a
		// normal end.
	}
	return err
}

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}
