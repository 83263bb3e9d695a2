package clients_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/npmtest"
)

// Agents of the suites (the story key may act for them; the other key for none of them);
// each suite imports its agent's bundle into its import agent, then erases that.
const (
	keys         = "story-key-0123456789=11,12,13,14,15,16;other-key-0123456789=99"
	tsAgent      = 11
	pyAgent      = 12
	expressAgent = 13
	fastapiAgent = 14
	tsImport     = 15
	pyImport     = 16
)

var factWord = regexp.MustCompile(`\bfact-[a-z0-9-]+\b`)

// extractionModel answers memory extraction prompts with a daily entry naming each distinct
// "fact-…" word of the transcript (anything else with a plain summary).
func extractionModel(r llmtest.Received) llmtest.Reply {
	transcript, ok := r.Transcript()
	if !ok {
		return llmtest.Reply{Content: "summary"}
	}
	seen := map[string]bool{}
	var lines []string
	for _, w := range factWord.FindAllString(transcript, -1) {
		if !seen[w] {
			seen[w] = true
			lines = append(lines, "- "+w)
		}
	}
	b, _ := json.Marshal(map[string]any{"should_update": len(lines) > 0, "reason": "test", "daily_entry": strings.Join(lines, "\n"),
		"memory_update": "", "profile_update": ""})
	return llmtest.Reply{Content: string(b)}
}

// service is the live MateMemory the suites talk to.
type service struct {
	url      string
	document []byte
}

// startService builds cmd/api and runs it as `make run` does (all-in-one: API, workers and
// scheduler on an embedded NATS, SQLite in a temporary directory), configured only through
// its environment, with the scripted extraction model; it stops at cleanup.
func startService(t *testing.T, corsOrigin string) service {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is needed to build cmd/api: %v", err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "api")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/api")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/api: %v\n%s", err, out)
	}
	fake := llmtest.New(t, extractionModel)
	cmd := exec.Command(bin, "-target=all")
	// Only the settings below: none of the developer's MATE_* or OPENAI_* leaks in.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MATE_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MATE_HTTP_ADDR=127.0.0.1:0", "MATE_DATA_DIR="+filepath.Join(tmp, "data"),
		"MATE_AUTH_KEYS="+keys, "MATE_HTTP_CORS_ORIGINS="+corsOrigin, "MATE_TIMEZONE=UTC", "MATE_NATS_SYNC_ALWAYS=false",
		"MATE_LLM_BASE_URL="+fake.URL+"/v1/", "MATE_LLM_API_KEY=test-key", "MATE_LLM_MODEL=fake-model",
		"MATE_MEMORY_COOLDOWN_MINUTES=0.02")
	url := startPrinting(t, cmd, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`))
	resp, err := http.Get(url + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("openapi.json: %d %v", resp.StatusCode, err)
	}
	return service{url: url, document: doc}
}

func (s service) env(agent int) []string {
	env := append(os.Environ(), "MATE_URL="+s.url, "MATE_API_KEY=story-key-0123456789", "MATE_OTHER_KEY=other-key-0123456789", fmt.Sprintf("MATE_AGENT_ID=%d", agent))
	switch agent {
	case tsAgent:
		env = append(env, fmt.Sprintf("MATE_IMPORT_AGENT_ID=%d", tsImport))
	case pyAgent:
		env = append(env, fmt.Sprintf("MATE_IMPORT_AGENT_ID=%d", pyImport))
	}
	return env
}

// need skips the test when a tool is missing, except under CI=true, where it fails.
func need(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI: %v", what, err)
	}
	t.Skipf("%s not installed: %v", what, err)
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// generated compares a file regenerated from the served document with the committed one;
// with MATE_UPDATE_CLIENTS=1 it rewrites the committed one instead.
func generated(t *testing.T, committed string, fresh []byte) {
	t.Helper()
	old, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(old, fresh) {
		return
	}
	if os.Getenv("MATE_UPDATE_CLIENTS") == "1" {
		if err := os.WriteFile(committed, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s regenerated", committed)
		return
	}
	a, b := strings.Split(string(old), "\n"), strings.Split(string(fresh), "\n")
	line := 0
	for line < min(len(a), len(b)) && a[line] == b[line] {
		line++
	}
	at := func(l []string) string {
		if line < len(l) {
			return l[line]
		}
		return "(end of file)"
	}
	t.Errorf("%s differs from what the served OpenAPI document generates, from line %d:\n  committed: %s\n  generated: %s\nregenerate it: MATE_UPDATE_CLIENTS=1 go test -run 'TestClients/.*/generated' ./clients",
		committed, line+1, at(a), at(b))
}

// TestClients runs the TypeScript and the Python client against the built service: the
// generation checks (committed types equal what the served document generates), the type
// checks (tsc strict, mypy --strict), pip installing the Python package, the chat-service
// story of each suite, the TypeScript client in Chromium from another origin, and the
// Express and FastAPI examples with a fake chat model that calls a memory tool. Without
// node/npm, Chromium, or Debian's python3 with httpx, pytest, mypy, FastAPI and uvicorn the
// parts that need them are skipped, except under CI=true, where they fail.
func TestClients(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages and runs node and python")
	}
	// The browser page's origin may call the API (CORS), as a web chat would.
	var pageRoot atomic.Value
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, browserPage)
			return
		}
		root, _ := pageRoot.Load().(string)
		http.FileServer(http.Dir(root)).ServeHTTP(w, r)
	}))
	t.Cleanup(pages.Close)
	svc := startService(t, pages.URL)

	// The two clients share the service (each its own agents) and overlap: one installs and
	// compiles while the other type-checks.
	t.Run("typescript", func(t *testing.T) {
		t.Parallel()
		var files []string
		err := filepath.WalkDir("typescript", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "dist") {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				rel, _ := filepath.Rel("typescript", p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		dir := npmtest.Install(t, "typescript", files...)
		bin := func(name string) string { return filepath.Join(dir, "node_modules", ".bin", name) }
		t.Run("generated", func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "openapi.json"), svc.document, 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, dir, os.Environ(), bin("openapi-typescript"), "openapi.json", "--output", "fresh.ts")
			fresh, err := os.ReadFile(filepath.Join(dir, "fresh.ts"))
			if err != nil {
				t.Fatal(err)
			}
			generated(t, filepath.Join("typescript", "src", "schema.ts"), fresh)
		})
		// The library compiles with no Node types (fetch only); tests and examples with them.
		run(t, dir, os.Environ(), bin("tsc"), "-p", "tsconfig.json")
		run(t, dir, os.Environ(), bin("tsc"), "-p", "tsconfig.test.json")
		t.Run("story", func(t *testing.T) {
			out := run(t, dir, svc.env(tsAgent), "node", "--test", "--test-reporter=tap", "dist/test/")
			if !strings.Contains(out, "# fail 0") || !strings.Contains(out, "# skipped 0") || strings.Contains(out, "# pass 0") {
				t.Fatalf("node --test did not pass every test:\n%s", out)
			}
		})
		t.Run("pack", func(t *testing.T) { packageStory(t, dir, svc) })
		t.Run("browser", func(t *testing.T) {
			pageRoot.Store(dir)
			browserStory(t, pages.URL, svc)
		})
		t.Run("express", func(t *testing.T) {
			cmd := exec.Command("node", "dist/examples/express.js")
			cmd.Dir = dir
			cmd.Env = append(svc.env(expressAgent), "OPENAI_API_KEY=chat-key", "PORT=0")
			chat := newChatModel(t)
			cmd.Env = append(cmd.Env, "OPENAI_BASE_URL="+chat.url+"/v1")
			port := startPrinting(t, cmd, regexp.MustCompile(`listening on (\d+)`))
			chatStory(t, svc, chat, "http://127.0.0.1:"+port, expressAgent, "fact-express-matcha")
		})
	})

	t.Run("python", func(t *testing.T) {
		t.Parallel()
		py := os.Getenv("MATE_PYTHON")
		if py == "" {
			py = "/usr/bin/python3"
		}
		_, err := os.Stat(py)
		if err == nil {
			if out, perr := exec.Command(py, "-c", "import setuptools, httpx, pytest, mypy, fastapi, uvicorn, ensurepip").CombinedOutput(); perr != nil {
				err = fmt.Errorf("%s lacks a module: %s (apt-get install python3-httpx python3-pytest mypy python3-fastapi python3-uvicorn python3-pip python3-venv python3-setuptools)", py, out)
			}
		}
		need(t, "python3 with httpx, pytest, mypy, fastapi and uvicorn", err)
		dir, err := filepath.Abs("python")
		if err != nil {
			t.Fatal(err)
		}
		env := append(svc.env(pyAgent), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+dir)
		t.Run("generated", func(t *testing.T) {
			doc := filepath.Join(t.TempDir(), "openapi.json")
			if err := os.WriteFile(doc, svc.document, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py, "generate_models.py", doc)
			cmd.Dir = dir
			fresh, err := cmd.Output()
			if err != nil {
				t.Fatalf("generate_models.py: %v", err)
			}
			generated(t, filepath.Join("python", "matememory", "models.py"), fresh)
		})
		t.Run("mypy", func(t *testing.T) {
			run(t, dir, env, py, "-m", "mypy", "--strict", "--cache-dir", t.TempDir(), "matememory", "tests", "examples")
		})
		t.Run("pip", func(t *testing.T) {
			// pyproject.toml installs with pip (offline here: the system's setuptools, no index).
			venv := t.TempDir()
			run(t, venv, os.Environ(), py, "-m", "venv", "--system-site-packages", venv)
			vpy := filepath.Join(venv, "bin", "python")
			run(t, venv, os.Environ(), vpy, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", dir)
			out := run(t, venv, []string{"PYTHONDONTWRITEBYTECODE=1"}, vpy, "-c",
				"import matememory, importlib.metadata as m; print(matememory.__file__, m.version('matememory'), matememory.MateMemory.read_file.__name__)")
			if !strings.Contains(out, filepath.Join(venv, "lib")) || !strings.Contains(out, "read_file") {
				t.Fatalf("installed package: %s", out)
			}
		})
		t.Run("story", func(t *testing.T) {
			out := run(t, dir, env, py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "tests")
			if !regexp.MustCompile(`\b\d+ passed\b`).MatchString(out) || strings.Contains(out, "skipped") {
				t.Fatalf("pytest did not pass every test:\n%s", out)
			}
		})
		t.Run("fastapi", func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f, err := l.(*net.TCPListener).File()
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			chat := newChatModel(t)
			// uvicorn serves the listener handed to it as fd 3: no port to guess.
			cmd := exec.Command(py, "-m", "uvicorn", "--fd", "3", "fastapi_chat:app")
			cmd.Dir = filepath.Join(dir, "examples")
			cmd.ExtraFiles = []*os.File{f}
			cmd.Env = append(svc.env(fastapiAgent), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+dir,
				"OPENAI_BASE_URL="+chat.url+"/v1", "OPENAI_API_KEY=chat-key")
			startPrinting(t, cmd, regexp.MustCompile(`Application startup complete`))
			f.Close()
			chatStory(t, svc, chat, "http://"+addr, fastapiAgent, "fact-fastapi-sencha")
		})
	})
}

// startPrinting starts cmd, kills it at cleanup and returns the first group of the first
// output line matching ready (failing after a deadline, with what it printed).
func startPrinting(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp) string {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM first (the service finishes in-flight work), then SIGKILL after a while.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		pw.Close()
	})
	found := make(chan string, 1)
	var printed atomic.Value
	printed.Store("")
	go func() {
		sc := bufio.NewScanner(pr)
		var all strings.Builder
		sent := false
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			printed.Store(all.String())
			if m := ready.FindStringSubmatch(sc.Text()); m != nil && !sent {
				sent = true
				found <- m[len(m)-1]
			}
		}
	}()
	select {
	case v := <-found:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not get ready:\n%s", cmd.Path, printed.Load())
		return ""
	}
}

// chatStory posts two chat turns to an example service (the first names fact; the second
// brings the conversation to the summarizer's minimum of 4 messages) and checks each used the
// context and ran the model's memory tool call, and that the completion's extraction wrote
// fact to the daily note once.
func chatStory(t *testing.T, svc service, chat *chatModel, base string, agent int64, fact string) {
	t.Helper()
	var eventID string
	for _, message := range []string{"Remember: I drink " + fact + " every morning.", "Thanks, that is all."} {
		before := chat.calls.Load()
		body, _ := json.Marshal(map[string]string{"conversationId": fmt.Sprintf("example-%d", agent), "message": message})
		resp, err := http.Post(base+"/chat", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Reply      string `json:"reply"`
			EventID    string `json:"eventId"`
			ToolRounds int    `json:"toolRounds"`
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("POST /chat: %d %s", resp.StatusCode, raw)
		}
		if out.ToolRounds != 1 || !strings.Contains(out.Reply, "files in my memory (error \"\")") || out.EventID == "" {
			t.Fatalf("chat answer %+v: want one tool round whose result the model read", out)
		}
		if n := chat.calls.Load() - before; n != 2 {
			t.Errorf("the chat model was called %d times, want 2 (tool call, answer)", n)
		}
		if got := chat.lastSystem.Load(); got == nil || !strings.Contains(got.(string), "You are a helpful assistant with a memory.") {
			t.Errorf("the model's system message was not the assembled context: %v", got)
		}
		eventID = out.EventID
	}
	c, err := client.New(svc.url, "story-key-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := c.WaitRun(ctx, agent, eventID)
	if err != nil || run.Status != client.StatusCompleted {
		t.Fatalf("the example's completion: run %+v, %v", run, err)
	}
	notes, err := c.ListFiles(ctx, agent, "memory/")
	if err != nil || len(notes) != 1 {
		t.Fatalf("daily notes %v, %v", notes, err)
	}
	note, err := c.ReadFile(ctx, agent, notes[0].Filename)
	if err != nil || strings.Count(note.Content, "- "+fact) != 1 {
		t.Fatalf("daily note %q (%v): want %q once", note.Content, err, fact)
	}
}

// chatModel is a fake OpenAI-compatible chat model for the examples: it answers a request
// without tool results with a call of list_workspace_memory_files (checking the memory tools
// were offered), and one with a tool result by reading it.
type chatModel struct {
	url        string
	calls      atomic.Int64
	lastSystem atomic.Value
}

func newChatModel(t *testing.T) *chatModel {
	m := &chatModel{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.calls.Add(1)
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer chat-key" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		offered := false
		for _, tl := range req.Tools {
			offered = offered || tl.Function.Name == "list_workspace_memory_files"
		}
		if !offered {
			http.Error(w, `{"error":{"message":"memory tools not offered"}}`, http.StatusBadRequest)
			return
		}
		if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
			m.lastSystem.Store(req.Messages[0].Content)
		}
		msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_list", "type": "function", "function": map[string]any{"name": "list_workspace_memory_files", "arguments": "{}"}}}}
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			var res struct {
				Files []any  `json:"files"`
				Error string `json:"error"`
			}
			_ = json.Unmarshal([]byte(last.Content), &res)
			msg = map[string]any{"role": "assistant", "content": fmt.Sprintf("I see %d files in my memory (error %q).", len(res.Files), res.Error)}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "fake-chat",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}}})
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	return m
}
