package deploy

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/matememory/matememory/pkg/internal/config"
)

// repoRoot is the module root as seen from this package's directory (go test's working dir).
const repoRoot = ".."

// configEnv is the environment variable holding the configuration file (pkg/internal/app's -config).
const configEnv = "MATE_CONFIG"

// settingEnv maps every environment name the binaries read to its property path: the names
// derived from pkg/internal/config's keys, plus the conventional OPENAI_* aliases (found by asking the
// loader, so a dropped alias shows up here).
func settingEnv(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range config.Keys() {
		out[config.EnvName(k)] = k
	}
	for name, path := range map[string]string{"OPENAI_BASE_URL": "mate.llm.base-url", "OPENAI_API_KEY": "mate.llm.api-key"} {
		cfg, err := config.Load("", lookup(map[string]string{name: "http://alias.invalid"}))
		if err != nil {
			t.Fatalf("probe alias %s: %v", name, err)
		}
		got := cfg.Mate.LLM.BaseURL
		if path == "mate.llm.api-key" {
			got = cfg.Mate.LLM.APIKey
		}
		if got == "http://alias.invalid" {
			out[name] = path
		}
	}
	return out
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// checkEnvNames reports every name in env that no binary reads: a typo there is silently
// ignored at run time, which is what this catches.
func checkEnvNames(where string, env map[string]string, known map[string]string) []error {
	var errs []error
	for _, name := range sortedKeys(env) {
		if name == configEnv {
			continue
		}
		if _, ok := known[name]; !ok {
			errs = append(errs, fmt.Errorf("%s: environment variable %s is not a MateMemory setting (pkg/internal/config); did you mean %s?", where, name, closest(name, known)))
		}
	}
	return errs
}

// loadSettings runs the binaries' own loader on a configuration file (may be "") and an
// environment, so every value is parsed and validated exactly as at start-up.
func loadSettings(where, file string, env map[string]string) (config.Config, error) {
	cfg, err := config.Load(file, lookup(env))
	if err != nil {
		return cfg, fmt.Errorf("%s: the binaries would refuse this configuration: %w", where, err)
	}
	return cfg, nil
}

// checkDeployedSettings holds what every deployed process must have: an external NATS (an
// empty URL would start an embedded server per process), MySQL, and API keys when listening
// beyond loopback (the binaries refuse to start otherwise).
// migrateOnly: the process only applies migrations and never connects to NATS.
func checkDeployedSettings(where string, cfg config.Config, migrateOnly bool) []error {
	var errs []error
	m := cfg.Mate
	if m.NATS.URL == "" {
		errs = append(errs, fmt.Errorf("%s: mate.nats.url (MATE_NATS_URL) is empty: each process would start its own embedded NATS", where))
	}
	if !migrateOnly && m.NATS.URL != "" && !m.NATS.HasCredentials() && !loopbackURLs(m.NATS.URL) {
		errs = append(errs, fmt.Errorf("%s: connects to NATS without credentials (MATE_NATS_USER/MATE_NATS_PASSWORD): the cluster takes no anonymous client (compose/nats/accounts.conf)", where))
	}
	if m.Database.Driver != "mysql" {
		errs = append(errs, fmt.Errorf("%s: mate.database.driver is %q; deploys use mysql (SQLite is per process)", where, m.Database.Driver))
	}
	if !config.LoopbackOnly(m.HTTP.Addr) && len(m.Auth.Keys) == 0 {
		errs = append(errs, fmt.Errorf("%s: listens on %s without API keys (MATE_AUTH_KEYS): the binaries refuse to start", where, m.HTTP.Addr))
	}
	if m.NATS.AckWaitSeconds <= m.LLM.TimeoutSeconds {
		errs = append(errs, fmt.Errorf("%s: mate.nats.ack-wait-seconds %v must exceed mate.llm.timeout-seconds %v, or JetStream redelivers during the LLM call", where, m.NATS.AckWaitSeconds, m.LLM.TimeoutSeconds))
	}
	return errs
}

// fileSettings lists the property paths a configuration file sets.
func fileSettings(raw []byte) (map[string]bool, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			out[prefix] = true
			return
		}
		for k, sub := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, sub)
		}
	}
	walk("", doc)
	return out, nil
}

// checkSetOnce reports settings given both in the file and in the environment: the
// environment silently wins, and an operator editing the file would see no effect.
func checkSetOnce(where string, file map[string]bool, env map[string]string, known map[string]string) []error {
	var errs []error
	for _, name := range sortedKeys(env) {
		if path, ok := known[name]; ok && file[path] {
			errs = append(errs, fmt.Errorf("%s: %s is set in the configuration file and as %s; the environment wins, keep one", where, path, name))
		}
	}
	return errs
}

// cmdNames lists the binaries under cmd/.
func cmdNames(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(repoRoot, "cmd", e.Name(), "main.go")); e.IsDir() && err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	if len(out) != 4 {
		t.Fatalf("cmd/ has %v; expected the four binaries api, emergence, scheduler, summarizer", out)
	}
	return out
}

// imageBinary is the image's one binary (built from cmd/api); --target picks the part.
const imageBinary = "/usr/local/bin/matememory"

// migrateCommand is the schema migration's command.
var migrateCommand = imageBinary + " migrate"

// binaryOf returns the part (a cmd/ name) a container command runs, or an error: the image's
// binary with --target=<part>, or its migrate command (the api's).
func binaryOf(command []string, cmds []string) (string, error) {
	if len(command) == 0 {
		return "", fmt.Errorf("no command: name the part explicitly (%s --target=<%s>)", imageBinary, strings.Join(cmds, "|"))
	}
	if command[0] != imageBinary {
		return "", fmt.Errorf("command %q runs no binary of the image (%s)", command[0], imageBinary)
	}
	if strings.Join(command, " ") == migrateCommand {
		return "api", nil
	}
	for i, a := range command[1:] {
		part, ok := strings.CutPrefix(strings.TrimPrefix(a, "-"), "-target=")
		if !ok && (a == "--target" || a == "-target") && i+2 < len(command) {
			part, ok = command[i+2], true
		}
		if !ok {
			continue
		}
		for _, c := range cmds {
			if part == c {
				return c, nil
			}
		}
		return "", fmt.Errorf("command %v: --target=%s is not a part (%s)", command, part, strings.Join(cmds, "|"))
	}
	return "", fmt.Errorf("command %v names no part: add --target=<%s>", command, strings.Join(cmds, "|"))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// closest suggests the known name with the smallest edit distance.
func closest(name string, known map[string]string) string {
	best, bestD := "", 1<<30
	for _, k := range sortedKeys(known) {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// expectErr fails unless one of errs mentions want: the negative tests use it to prove a
// check really fires.
func expectErr(t *testing.T, errs []error, want string) {
	t.Helper()
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			return
		}
	}
	t.Errorf("expected an error mentioning %q; got %d error(s): %v", want, len(errs), errs)
}

// noErrs fails with every error.
func noErrs(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		t.Error(err)
	}
}

// loopbackURLs reports whether every NATS URL of a comma-separated list is on this machine
// (the hand-run local cluster, where anonymous clients are acceptable).
func loopbackURLs(list string) bool {
	for _, u := range strings.Split(list, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil || !config.LoopbackOnly(pu.Host) {
			return false
		}
	}
	return true
}
