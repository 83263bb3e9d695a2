package llmtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm"
)

// The fake model can also run in a child process, so that a benchmark measuring its own
// process's CPU (getrusage, a CPU profile) counts the client's work and not the model's,
// as in production where the model runs elsewhere. The child is the test binary itself,
// re-executed with ServeEnv naming one of the answer scripts the package registers in
// its TestMain:
//
//	func TestMain(m *testing.M) {
//		llmtest.MaybeServe(llmtest.Handlers{"facts": factsReply})
//		os.Exit(m.Run())
//	}
//
//	fake := llmtest.NewExternal(b, "facts")
//	client := llm.NewOpenAI(fake.Config())

// ServeEnv, set to the name of a handler, makes MaybeServe serve that handler instead of
// returning to the tests.
const ServeEnv = "MATE_LLMTEST_SERVE"

// Handlers names answer scripts by which a child process can be asked to serve them
// (functions cannot cross the process boundary, names can).
type Handlers map[string]func(Received) Reply

// Paths of the child's control endpoints, beside the chat-completions endpoint.
const (
	callsPath    = "/_llmtest/calls"
	receivedPath = "/_llmtest/received"
)

// MaybeServe is meant to be the first call of a package's TestMain. In a process started
// by NewExternal (ServeEnv set), it serves the named handler on 127.0.0.1:0, writes the
// server's base URL as the first line of stdout, serves until stdin is closed (the parent
// closes it at cleanup, and the pipe closes when the parent dies) and exits the process
// with status 0. Otherwise it returns at once.
func MaybeServe(handlers Handlers) {
	name, ok := os.LookupEnv(ServeEnv)
	if !ok {
		return
	}
	h := handlers[name]
	if h == nil {
		fmt.Fprintf(os.Stderr, "llmtest: %s=%q names no handler passed to MaybeServe (have %v)\n", ServeEnv, name, handlerNames(handlers))
		os.Exit(2)
	}
	s := &Server{}
	s.SetHandler(h)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+callsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(externalStats{Calls: s.Calls.Load(), MaxInFlight: s.MaxInFlight.Load()})
	})
	mux.HandleFunc("GET "+receivedPath, func(w http.ResponseWriter, _ *http.Request) {
		rec := s.Received()
		out := make([]receivedJSON, len(rec))
		for i, r := range rec {
			out[i] = receivedJSON{Received: r, Messages: r.Messages}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/", s.serve)
	s.Server = httptest.NewServer(mux)
	fmt.Println(s.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	// No graceful Close: it would wait for a Hang reply whose client is still connected.
	os.Exit(0)
}

func handlerNames(h Handlers) []string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	return names
}

type externalStats struct {
	Calls       int64 `json:"calls"`
	MaxInFlight int64 `json:"maxInFlight"`
}

// receivedJSON carries a Received across the process boundary (Received keeps its
// messages out of its own JSON form, which is the wire request's).
type receivedJSON struct {
	Received
	Messages []llm.Message `json:"messages"`
}

// External is a fake server running in a child process (see MaybeServe).
type External struct {
	// URL is the base URL of the child's server, as Server.URL.
	URL string

	tb     testing.TB
	client *http.Client
}

// NewExternal starts the current test binary again as a fake server answering with the
// handler registered under name in the package's TestMain (through MaybeServe), and stops
// it at cleanup. It fails tb when the child does not come up within 30 seconds.
func NewExternal(tb testing.TB, name string) *External {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), ServeEnv+"="+name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("llmtest: external fake %q: %v", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("llmtest: external fake %q: %v", name, err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("llmtest: starting external fake %q: %v", name, err)
	}
	exited := make(chan struct{})
	stop := func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, r) // whatever else the child prints, until it exits
		_ = cmd.Wait()
		close(exited)
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(30 * time.Second):
		stop()
		tb.Fatalf("llmtest: external fake %q printed no URL within 30s", name)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://") {
		stop()
		tb.Fatalf("llmtest: external fake %q printed %q, not its URL: does the package's TestMain call llmtest.MaybeServe first, with a handler of that name?", name, line)
	}
	tb.Cleanup(stop)
	return &External{URL: url, tb: tb, client: &http.Client{Timeout: 10 * time.Second}}
}

// Config returns an llm.Config pointing at the child's server, as Server.Config does.
func (e *External) Config() llm.Config { return config(e.URL) }

// Calls is the number of chat-completion requests the child has received. It fails the
// test when the child cannot be asked.
func (e *External) Calls() int64 {
	e.tb.Helper()
	var st externalStats
	e.get(callsPath, &st)
	return st.Calls
}

// MaxInFlight is the highest number of concurrent requests the child has seen.
func (e *External) MaxInFlight() int64 {
	e.tb.Helper()
	var st externalStats
	e.get(callsPath, &st)
	return st.MaxInFlight
}

// Received returns the requests the child has seen so far.
func (e *External) Received() []Received {
	e.tb.Helper()
	var in []receivedJSON
	e.get(receivedPath, &in)
	out := make([]Received, len(in))
	for i, r := range in {
		out[i] = r.Received
		out[i].Messages = r.Messages
	}
	return out
}

func (e *External) get(path string, into any) {
	e.tb.Helper()
	resp, err := e.client.Get(e.URL + path)
	if err != nil {
		e.tb.Fatalf("llmtest: asking the external fake: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		e.tb.Fatalf("llmtest: external fake answered %s to GET %s: %s", resp.Status, path, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		e.tb.Fatalf("llmtest: reading the external fake's answer to GET %s: %v", path, err)
	}
}
