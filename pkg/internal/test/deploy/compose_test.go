package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats-server/v2/server"
	"gopkg.in/yaml.v3"
)

const composeFile = "compose/docker-compose.yaml"

// composeProject is the part of the Compose specification the compose file uses; decoding
// refuses any other key (top-level x-* extension fields excepted).
type composeProject struct {
	Name       string                     `yaml:"name"`
	Services   map[string]*composeService `yaml:"services"`
	Volumes    map[string]*struct{}       `yaml:"volumes"`
	Extensions map[string]yaml.Node       `yaml:",inline"`
}

type composeService struct {
	Image           string                       `yaml:"image"`
	Build           *composeBuild                `yaml:"build"`
	Command         []string                     `yaml:"command"`
	Environment     map[string]string            `yaml:"environment"`
	Ports           []string                     `yaml:"ports"`
	Volumes         []string                     `yaml:"volumes"`
	Healthcheck     *composeHealthcheck          `yaml:"healthcheck"`
	StopGracePeriod string                       `yaml:"stop_grace_period"`
	DependsOn       map[string]composeDependency `yaml:"depends_on"`
	Restart         string                       `yaml:"restart"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
	Target     string `yaml:"target"`
}

type composeHealthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

type composeDependency struct {
	Condition string `yaml:"condition"`
	Restart   bool   `yaml:"restart,omitempty"`
}

func parseCompose(raw []byte) (*composeProject, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	p := &composeProject{}
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%s: %w", composeFile, err)
	}
	for k := range p.Extensions {
		if !strings.HasPrefix(k, "x-") {
			return nil, fmt.Errorf("%s: unknown top-level key %q (extension fields start with x-)", composeFile, k)
		}
	}
	return p, nil
}

func loadCompose(t testing.TB) *composeProject {
	t.Helper()
	raw, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseCompose(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var interpolation = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate applies Compose's variable substitution with the given shell environment:
// ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, $VAR and $$.
func interpolate(s string, shell map[string]string) (string, error) {
	var err error
	out := interpolation.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := interpolation.FindStringSubmatch(m)
		name := sub[1] + sub[4]
		v, set := shell[name]
		switch sub[2] {
		case ":-":
			if v == "" {
				return sub[3]
			}
		case "-":
			if !set {
				return sub[3]
			}
		case ":?", "?":
			if v == "" {
				err = fmt.Errorf("variable %s is required: %s", name, sub[3])
			}
		}
		return v
	})
	return out, err
}

// matememoryServices are the services that run the MateMemory image.
func matememoryServices(p *composeProject) []string {
	var out []string
	for _, name := range sortedKeys(p.Services) {
		if p.Services[name].Build != nil {
			out = append(out, name)
		}
	}
	return out
}

// natsNode is one NATS service with the options nats-server parsed from its configuration.
type natsNode struct {
	service string
	opts    *server.Options
}

// checkCompose checks the compose file's services against each other, the Dockerfile, the
// NATS configuration and pkg/internal/config. shell is the environment compose interpolates from.
func checkCompose(t *testing.T, p *composeProject, shell map[string]string) []error {
	t.Helper()
	var errs []error
	known := settingEnv(t)
	cmds := cmdNames(t)
	stages := dockerStages(t)

	for _, name := range sortedKeys(p.Services) {
		s := p.Services[name]
		where := composeFile + ": service " + name
		if s.Image == "" {
			errs = append(errs, fmt.Errorf("%s: no image", where))
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: depends on %s, which is not a service", where, dep))
				continue
			}
			switch d.Condition {
			case "service_healthy":
				if target.Healthcheck == nil {
					errs = append(errs, fmt.Errorf("%s: waits for %s to be healthy, but %s has no healthcheck", where, dep, dep))
				}
			case "service_completed_successfully":
				if target.Restart != "no" && target.Restart != "" {
					errs = append(errs, fmt.Errorf("%s: waits for %s to complete, but %s restarts (%q)", where, dep, dep, target.Restart))
				}
			case "service_started":
			default:
				errs = append(errs, fmt.Errorf("%s: depends_on %s condition %q; accepted: service_started, service_healthy, service_completed_successfully", where, dep, d.Condition))
			}
		}
		if hc := s.Healthcheck; hc != nil {
			if len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL") {
				errs = append(errs, fmt.Errorf("%s: healthcheck test %v must start with CMD or CMD-SHELL", where, hc.Test))
			}
			for _, d := range []string{hc.Interval, hc.Timeout, hc.StartPeriod} {
				if _, err := time.ParseDuration(d); err != nil {
					errs = append(errs, fmt.Errorf("%s: healthcheck duration %q: %v", where, d, err))
				}
			}
		} else if s.Restart != "no" {
			errs = append(errs, fmt.Errorf("%s: long-running service without a healthcheck", where))
		}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				errs = append(errs, fmt.Errorf("%s: volume %q is not source:target", where, v))
				continue
			}
			if strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") {
				if _, err := os.Stat(filepath.Join(filepath.Dir(composeFile), parts[0])); err != nil {
					errs = append(errs, fmt.Errorf("%s: bind mount source %s: %v", where, parts[0], err))
				}
			} else if _, ok := p.Volumes[parts[0]]; !ok {
				errs = append(errs, fmt.Errorf("%s: named volume %s is not declared under volumes", where, parts[0]))
			}
		}
		for _, port := range s.Ports {
			if !strings.HasPrefix(port, "127.0.0.1:") {
				errs = append(errs, fmt.Errorf("%s: port %q is published on every interface; bind it to 127.0.0.1 (the API keys here are development placeholders)", where, port))
			}
		}
	}

	// NATS nodes: parse each node's configuration with nats-server's own parser.
	var nodes []natsNode
	for _, name := range sortedKeys(p.Services) {
		s := p.Services[name]
		if !strings.HasPrefix(s.Image, "nats:") {
			continue
		}
		opts, nerrs := composeNATSNode(t, name, s, shell)
		errs = append(errs, nerrs...)
		if opts != nil {
			nodes = append(nodes, natsNode{service: name, opts: opts})
		}
	}
	errs = append(errs, checkNATSCluster(nodes)...)

	// MateMemory services: the image, the binary, the settings.
	for _, name := range matememoryServices(p) {
		s := p.Services[name]
		where := composeFile + ": service " + name
		b := s.Build
		ctx := filepath.Join(filepath.Dir(composeFile), b.Context)
		if _, err := os.Stat(filepath.Join(ctx, "go.mod")); err != nil {
			errs = append(errs, fmt.Errorf("%s: build context %s is not the module root", where, b.Context))
		}
		if _, err := os.Stat(filepath.Join(ctx, b.Dockerfile)); err != nil {
			errs = append(errs, fmt.Errorf("%s: dockerfile %s: %v", where, b.Dockerfile, err))
		}
		if _, ok := stages[b.Target]; !ok {
			errs = append(errs, fmt.Errorf("%s: build target %q is not a stage of the Dockerfile (%v)", where, b.Target, sortedKeys(stages)))
		} else if !stages[b.Target].hasHealthTool {
			errs = append(errs, fmt.Errorf("%s: build target %q has no wget for the health check", where, b.Target))
		}
		bin, err := binaryOf(s.Command, cmds)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		env := map[string]string{}
		for k, v := range s.Environment {
			iv, err := interpolate(v, shell)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", where, k, err))
			}
			env[k] = iv
		}
		errs = append(errs, checkEnvNames(where, env, known)...)
		cfg, err := loadSettings(where, "", env)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, checkDeployedSettings(where, cfg, slices.Contains(s.Command, "migrate"))...)
		if cfg.Mate.NATS.Replicas > len(nodes) {
			errs = append(errs, fmt.Errorf("%s: MATE_NATS_REPLICAS %d but the cluster has %d nodes", where, cfg.Mate.NATS.Replicas, len(nodes)))
		}
		errs = append(errs, checkNATSURLs(where, cfg.Mate.NATS.URL, nodes)...)
		errs = append(errs, checkDSN(where, cfg.Mate.Database.DSN, p)...)

		if slices.Contains(s.Command, "migrate") { // a one-shot command
			if strings.Join(s.Command, " ") != migrateCommand || s.Restart != "no" {
				errs = append(errs, fmt.Errorf("%s: a one-shot service must run `%s` with restart \"no\"", where, migrateCommand))
			}
			continue
		}
		if s.Healthcheck == nil {
			continue
		}
		_, port, _ := net.SplitHostPort(cfg.Mate.HTTP.Addr)
		if want := "http://127.0.0.1:" + port + "/readyz"; !slices.Contains(s.Healthcheck.Test, want) {
			errs = append(errs, fmt.Errorf("%s: healthcheck %v does not probe %s (mate.http.addr %s)", where, s.Healthcheck.Test, want, cfg.Mate.HTTP.Addr))
		}
		if llmComponents[bin] {
			grace, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil || grace.Seconds() <= cfg.Mate.LLM.TimeoutSeconds {
				errs = append(errs, fmt.Errorf("%s: stop_grace_period %q must exceed the LLM timeout %vs, or docker kills in-flight extractions", where, s.StopGracePeriod, cfg.Mate.LLM.TimeoutSeconds))
			}
		}
		if d, ok := s.DependsOn["migrate"]; !ok || d.Condition != "service_completed_successfully" {
			errs = append(errs, fmt.Errorf("%s: must start after migrate completes successfully", where))
		}
		for _, n := range nodes {
			if d, ok := s.DependsOn[n.service]; !ok || d.Condition != "service_healthy" {
				errs = append(errs, fmt.Errorf("%s: must wait for NATS node %s to be healthy", where, n.service))
			}
		}
	}
	return errs
}

// composeNATSNode parses a NATS service's configuration file (found through its --config
// flag and bind mount) with the service's environment, as the container would.
func composeNATSNode(t *testing.T, name string, s *composeService, shell map[string]string) (*server.Options, []error) {
	where := composeFile + ": service " + name
	var confPath string
	for i, a := range s.Command {
		if (a == "--config" || a == "-c") && i+1 < len(s.Command) {
			confPath = s.Command[i+1]
		}
	}
	var source string
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == confPath {
			source = filepath.Join(filepath.Dir(composeFile), parts[0])
		}
	}
	if confPath == "" || source == "" {
		return nil, []error{fmt.Errorf("%s: command %v: --config must name a bind-mounted file", where, s.Command)}
	}
	for k, v := range s.Environment {
		iv, err := interpolate(v, shell)
		if err != nil {
			return nil, []error{fmt.Errorf("%s: %s: %w", where, k, err)}
		}
		t.Setenv(k, iv)
	}
	opts, err := server.ProcessConfigFile(source)
	for k := range s.Environment {
		os.Unsetenv(k)
	}
	if err != nil {
		return nil, []error{fmt.Errorf("%s: nats-server refuses %s: %w", where, source, err)}
	}
	var errs []error
	if len(opts.Users) == 0 && len(opts.Nkeys) == 0 && opts.TrustedOperators == nil {
		errs = append(errs, fmt.Errorf("%s: %s defines no users: anonymous clients could read every conversation and publish events (include nats/accounts.conf)", where, source))
	}
	for _, u := range opts.Users {
		if u.Password == "" {
			errs = append(errs, fmt.Errorf("%s: NATS user %s has an empty password (set its NATS_*_PASSWORD)", where, u.Username))
		}
	}
	if !opts.JetStream || !opts.SyncAlways {
		errs = append(errs, fmt.Errorf("%s: JetStream must be on and fsync every write (sync_interval: always, the design's durability rule); got jetstream=%v sync_always=%v", where, opts.JetStream, opts.SyncAlways))
	}
	stored := false
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && !strings.HasPrefix(parts[0], ".") && strings.HasPrefix(opts.StoreDir+"/", strings.TrimSuffix(parts[1], "/")+"/") {
			stored = true
		}
	}
	if !stored {
		errs = append(errs, fmt.Errorf("%s: JetStream store %s is not on a named volume: the stream would vanish with the container", where, opts.StoreDir))
	}
	if s.Healthcheck == nil || !slices.Contains(s.Healthcheck.Test, fmt.Sprintf("http://127.0.0.1:%d/healthz", opts.HTTPPort)) {
		errs = append(errs, fmt.Errorf("%s: healthcheck must probe the monitoring port's /healthz (http_port %d)", where, opts.HTTPPort))
	}
	return opts, errs
}

// checkNATSCluster: three nodes with distinct names, one cluster name, and routes to every node.
func checkNATSCluster(nodes []natsNode) []error {
	var errs []error
	if len(nodes) != 3 {
		errs = append(errs, fmt.Errorf("%s: %d NATS nodes; the local cluster has three", composeFile, len(nodes)))
	}
	names := map[string]string{}
	for _, n := range nodes {
		if other, dup := names[n.opts.ServerName]; dup || n.opts.ServerName == "" {
			errs = append(errs, fmt.Errorf("%s: NATS nodes %s and %s share the server name %q", composeFile, other, n.service, n.opts.ServerName))
		}
		names[n.opts.ServerName] = n.service
		if n.opts.Cluster.Name == "" || n.opts.Cluster.Name != nodes[0].opts.Cluster.Name {
			errs = append(errs, fmt.Errorf("%s: %s: cluster name %q differs from %s's %q", composeFile, n.service, n.opts.Cluster.Name, nodes[0].service, nodes[0].opts.Cluster.Name))
		}
		routed := map[string]bool{}
		for _, r := range n.opts.Routes {
			if r.Port() == strconv.Itoa(n.opts.Cluster.Port) {
				routed[r.Hostname()] = true
			}
		}
		for _, other := range nodes {
			if other.service != n.service && !routed[other.service] {
				errs = append(errs, fmt.Errorf("%s: %s has no route to %s:%d", composeFile, n.service, other.service, n.opts.Cluster.Port))
			}
		}
	}
	return errs
}

// checkNATSURLs: MATE_NATS_URL lists every node, at its client port.
func checkNATSURLs(where, raw string, nodes []natsNode) []error {
	var errs []error
	listed := map[string]bool{}
	for _, u := range strings.Split(raw, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil || pu.Scheme != "nats" {
			errs = append(errs, fmt.Errorf("%s: MATE_NATS_URL entry %q is not a nats:// URL", where, u))
			continue
		}
		found := false
		for _, n := range nodes {
			if n.service == pu.Hostname() && pu.Port() == strconv.Itoa(n.opts.Port) {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s: MATE_NATS_URL entry %s is no NATS service's client port", where, pu.Host))
		}
		listed[pu.Hostname()] = true
	}
	for _, n := range nodes {
		if !listed[n.service] {
			errs = append(errs, fmt.Errorf("%s: MATE_NATS_URL does not list %s: clients could not start while the listed nodes are down", where, n.service))
		}
	}
	return errs
}

// checkDSN: the DSN reaches the MySQL service with the database and user it creates.
func checkDSN(where, dsn string, p *composeProject) []error {
	cfg, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		return []error{fmt.Errorf("%s: MATE_DATABASE_DSN: %w", where, err)}
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return []error{fmt.Errorf("%s: MATE_DATABASE_DSN address %q: %w", where, cfg.Addr, err)}
	}
	db, ok := p.Services[host]
	if !ok {
		return []error{fmt.Errorf("%s: MATE_DATABASE_DSN host %s is not a service", where, host)}
	}
	e := db.Environment
	if cfg.DBName != e["MYSQL_DATABASE"] || cfg.User != e["MYSQL_USER"] || cfg.Passwd != e["MYSQL_PASSWORD"] {
		return []error{fmt.Errorf("%s: MATE_DATABASE_DSN (user %s, database %s) does not match service %s's MYSQL_USER/MYSQL_PASSWORD/MYSQL_DATABASE", where, cfg.User, cfg.DBName, host)}
	}
	if !strings.HasPrefix(db.Image, "mysql:8") && !strings.HasPrefix(db.Image, "mariadb:11") {
		return []error{fmt.Errorf("%s: database image %s; MateMemory is tested on MySQL 8 and MariaDB 11", where, db.Image)}
	}
	return nil
}

func TestCompose(t *testing.T) {
	p := loadCompose(t)
	noErrs(t, checkCompose(t, p, nil))
	for _, name := range sortedKeys(p.Services) {
		if img := p.Services[name].Image; strings.HasPrefix(img, "nats:") {
			checkNATSImage(t, composeFile+" "+name, img)
		}
	}
	var bins []string
	for _, name := range matememoryServices(p) {
		if c := p.Services[name].Command; !slices.Contains(c, "migrate") {
			if part, err := binaryOf(c, cmdNames(t)); err == nil {
				bins = append(bins, part)
			}
		}
	}
	sort.Strings(bins)
	if strings.Join(bins, ",") != strings.Join(cmdNames(t), ",") {
		t.Errorf("compose runs %v; expected one service per part %v", bins, cmdNames(t))
	}
	// An operator's own settings flow through interpolation into valid configuration.
	noErrs(t, checkCompose(t, p, map[string]string{"MATE_AUTH_KEYS": "chat-key-0123456789=1,2;ops-key-0123456789=admin", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "MATE_LLM_MODEL": "qwen2.5"}))
}

func TestComposeChecksFail(t *testing.T) {
	cases := []struct {
		name   string
		shell  map[string]string
		mutate func(p *composeProject)
		want   string
	}{
		{"dependency on a missing service", nil, func(p *composeProject) {
			p.Services["api"].DependsOn["nats-4"] = composeDependency{Condition: "service_healthy"}
		}, "depends on nats-4, which is not a service"},
		{"healthy dependency without healthcheck", nil, func(p *composeProject) { p.Services["mysql"].Healthcheck = nil }, "has no healthcheck"},
		{"misspelt setting", nil, func(p *composeProject) { p.Services["summarizer"].Environment["MATE_NATS_REPLICA"] = "3" }, "MATE_NATS_REPLICA is not a MateMemory setting"},
		{"invalid API keys from the shell", map[string]string{"MATE_AUTH_KEYS": "nokeyhere"}, nil, "mate.auth.keys"},
		{"no API keys on 0.0.0.0", map[string]string{"MATE_AUTH_KEYS": ""}, func(p *composeProject) {
			p.Services["api"].Environment["MATE_AUTH_KEYS"] = "${MATE_AUTH_KEYS}"
		}, "without API keys"},
		{"URL of a missing node", nil, func(p *composeProject) {
			p.Services["api"].Environment["MATE_NATS_URL"] = "nats://nats-1:4222,nats://nats-9:4222"
		}, "no NATS service's client port"},
		{"DSN with the wrong password", nil, func(p *composeProject) {
			p.Services["scheduler"].Environment["MATE_DATABASE_DSN"] = "matememory:x@tcp(mysql:3306)/matememory"
		}, "does not match service mysql"},
		{"short grace period", nil, func(p *composeProject) { p.Services["emergence"].StopGracePeriod = "10s" }, "stop_grace_period"},
		{"unknown build target", nil, func(p *composeProject) {
			p.Services["api"].Build = &composeBuild{Context: "../..", Dockerfile: "deploy/docker/Dockerfile", Target: "scratch"}
		}, `build target "scratch"`},
		{"port on every interface", nil, func(p *composeProject) { p.Services["api"].Ports = []string{"8080:8080"} }, "published on every interface"},
		{"NATS nodes sharing a name", nil, func(p *composeProject) {
			p.Services["nats-3"].Environment["NATS_SERVER_NAME"] = "nats-1"
		}, "share the server name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := loadCompose(t)
			// Anchors make services share maps; give each its own before changing one.
			for _, s := range p.Services {
				env := map[string]string{}
				for k, v := range s.Environment {
					env[k] = v
				}
				s.Environment = env
				deps := map[string]composeDependency{}
				for k, v := range s.DependsOn {
					deps[k] = v
				}
				s.DependsOn = deps
			}
			if tc.mutate != nil {
				tc.mutate(p)
			}
			expectErr(t, checkCompose(t, p, tc.shell), tc.want)
		})
	}
	if _, err := parseCompose([]byte("services:\n  api:\n    image: x\n    enviroment:\n      A: b\n")); err == nil {
		t.Error("a misspelt service key (enviroment) decoded")
	}
	if _, err := parseCompose([]byte("service:\n  api:\n    image: x\n")); err == nil {
		t.Error("a misspelt top-level key (service) decoded")
	}
}

// dockerStage is one FROM … AS name stage of the Dockerfile.
type dockerStage struct {
	name, from    string
	instrs        [][2]string // instruction, arguments
	hasHealthTool bool
}

// parseDockerfile splits a Dockerfile into its global ARGs and stages: comments dropped,
// continuation lines joined.
func parseDockerfile(raw []byte) (map[string]string, []*dockerStage, error) {
	args := map[string]string{}
	var stages []*dockerStage
	var cur *dockerStage
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var logical strings.Builder
	flush := func() error {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return nil
		}
		instr, rest, _ := strings.Cut(line, " ")
		instr = strings.ToUpper(instr)
		rest = strings.TrimSpace(rest)
		switch {
		case instr == "FROM":
			f := strings.Fields(rest)
			st := &dockerStage{}
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					st.name = f[i+1]
					i++
				default:
					st.from = f[i]
				}
			}
			stages = append(stages, st)
			cur = st
		case cur == nil && instr == "ARG":
			k, v, _ := strings.Cut(rest, "=")
			args[k] = strings.Trim(v, `"`)
		case cur == nil:
			return fmt.Errorf("%s before the first FROM", instr)
		default:
			cur.instrs = append(cur.instrs, [2]string{instr, rest})
		}
		return nil
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			logical.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		logical.WriteString(line)
		if err := flush(); err != nil {
			return nil, nil, err
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	for _, st := range stages {
		st.hasHealthTool = strings.HasPrefix(st.from, "alpine:") || strings.HasPrefix(st.from, "busybox")
	}
	return args, stages, sc.Err()
}

const dockerfile = "docker/Dockerfile"

func dockerStages(t testing.TB) map[string]*dockerStage {
	t.Helper()
	raw, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	_, stages, err := parseDockerfile(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dockerStage{}
	for _, s := range stages {
		out[s.name] = s
	}
	return out
}

// checkDockerfile: a Go 1.26 builder producing static, trimmed binaries for every cmd/,
// runtime stages that run as a non-root user, expose the HTTP port, and carry no HEALTHCHECK.
func checkDockerfile(t testing.TB, raw []byte) []error {
	t.Helper()
	var errs []error
	args, stages, err := parseDockerfile(raw)
	if err != nil {
		return []error{err}
	}
	if len(stages) < 2 {
		return []error{fmt.Errorf("%s: expected a multi-stage build, got %d stage(s)", dockerfile, len(stages))}
	}
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		return []error{err}
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	build := stages[0]
	if !strings.HasPrefix(build.from, "golang:") {
		errs = append(errs, fmt.Errorf("%s: the first stage builds from %s; expected golang", dockerfile, build.from))
	}
	goVersion := strings.TrimPrefix(os.Expand(build.from, func(k string) string { return args[k] }), "golang:")
	if goLine == nil || !strings.HasPrefix(goVersion, string(goLine[1])) {
		errs = append(errs, fmt.Errorf("%s: builder Go %q does not match go.mod's go %s", dockerfile, goVersion, goLine[1]))
	}
	var buildText strings.Builder
	for _, in := range build.instrs {
		buildText.WriteString(in[0] + " " + in[1] + "\n")
	}
	bt := buildText.String()
	// One binary (cmd/api runs every part with --target), its version stamped.
	for _, want := range []string{"CGO_ENABLED=0", "go build", "-trimpath", "-o /out/bin/matememory ./cmd/api",
		"-X github.com/matememory/matememory/pkg/internal/app.Version=${VERSION}"} {
		if !strings.Contains(bt, want) {
			errs = append(errs, fmt.Errorf("%s: the build stage does not use %q", dockerfile, want))
		}
	}
	if n := strings.Count(bt, "go build"); n != 1 {
		errs = append(errs, fmt.Errorf("%s: the build stage runs go build %d times; the image ships one binary", dockerfile, n))
	}
	digest := regexp.MustCompile(`^[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}$`)
	for _, st := range stages {
		if !digest.MatchString(st.from) {
			errs = append(errs, fmt.Errorf("%s: stage %s builds FROM %s; pin the base by tag and digest (image:tag@sha256:…)", dockerfile, st.name, st.from))
		}
	}
	names := map[string]bool{}
	for _, st := range stages {
		names[st.name] = true
	}
	for _, st := range stages[1:] {
		where := fmt.Sprintf("%s: stage %s", dockerfile, st.name)
		user, expose, cmd, labels, env := "", false, "", "", ""
		for _, in := range st.instrs {
			switch in[0] {
			case "LABEL":
				labels += " " + in[1]
			case "ENV":
				env += " " + in[1]
			case "USER":
				user = in[1]
			case "EXPOSE":
				expose = expose || slices.Contains(strings.Fields(in[1]), "8080")
			case "CMD", "ENTRYPOINT":
				cmd = in[1]
			case "COPY":
				if m := regexp.MustCompile(`--from=(\S+)`).FindStringSubmatch(in[1]); m != nil && !names[m[1]] {
					errs = append(errs, fmt.Errorf("%s: COPY --from=%s names no stage", where, m[1]))
				}
			}
		}
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			errs = append(errs, fmt.Errorf("%s: USER %q; the runtime must run as a numeric non-root uid (runAsNonRoot can only verify a numeric one)", where, user))
		}
		if !expose {
			errs = append(errs, fmt.Errorf("%s: does not EXPOSE 8080", where))
		}
		if !strings.HasPrefix(cmd, "[") {
			errs = append(errs, fmt.Errorf("%s: CMD %q must be in exec form (the distroless runtime has no shell)", where, cmd))
		} else if cmd != `["`+imageBinary+`"]` {
			errs = append(errs, fmt.Errorf("%s: CMD %s; expected [%q]", where, cmd, imageBinary))
		}
		for _, l := range []string{"org.opencontainers.image.source=", "org.opencontainers.image.version=\"${VERSION}\"", "org.opencontainers.image.revision=\"${REVISION}\""} {
			if !strings.Contains(labels, l) {
				errs = append(errs, fmt.Errorf("%s: no OCI label %s", where, l))
			}
		}
		// EXPOSE 8080 must be reachable: listen on every interface (keys are required there).
		if !strings.Contains(env, "MATE_HTTP_ADDR=0.0.0.0:8080") {
			errs = append(errs, fmt.Errorf("%s: does not set MATE_HTTP_ADDR=0.0.0.0:8080; the default listens on loopback and `docker run -p 8080:8080` could not reach it", where))
		}
	}
	for _, st := range stages {
		for _, in := range st.instrs {
			if in[0] == "HEALTHCHECK" {
				errs = append(errs, fmt.Errorf("%s: stage %s declares a HEALTHCHECK; Kubernetes probes /healthz and /readyz, compose declares its own", dockerfile, st.name))
			}
		}
	}
	last := stages[len(stages)-1]
	if !strings.Contains(last.from, "distroless/static") {
		errs = append(errs, fmt.Errorf("%s: the default (last) stage runs on %s; expected distroless/static", dockerfile, last.from))
	}
	return errs
}

func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	noErrs(t, checkDockerfile(t, raw))

	t.Run("checks fail", func(t *testing.T) {
		cases := []struct{ name, old, new, want string }{
			{"root runtime", "USER 65532:65532\nWORKDIR /data\nEXPOSE 8080\nCMD [\"/usr/local/bin/matememory\"]\n\n#", "WORKDIR /data\nEXPOSE 8080\nCMD [\"/usr/local/bin/matememory\"]\n\n#", "non-root uid"},
			{"healthcheck", "EXPOSE 8080\n", "EXPOSE 8080\nHEALTHCHECK CMD wget -q http://127.0.0.1:8080/healthz\n", "HEALTHCHECK"},
			{"cgo", "ENV CGO_ENABLED=0\n", "\n", "CGO_ENABLED=0"},
			{"tag-pinned base", "FROM alpine:3.22@sha256:14358309a308569c32bdc37e2e0e9694be33a9d99e68afb0f5ff33cc1f695dce AS alpine", "FROM alpine:3.22 AS alpine", "pin the base by tag and digest"},
			{"no version stamp", "-X github.com/matememory/matememory/pkg/internal/app.Version=${VERSION}", "", "pkg/internal/app.Version"},
			{"four binaries", "-o /out/bin/matememory ./cmd/api", "-o /out/bin/matememory ./cmd/api; go build -o /out/bin/summarizer ./cmd/summarizer", "go build 2 times"},
			{"no OCI labels", "      org.opencontainers.image.version=\"${VERSION}\" \\\n", "", "no OCI label org.opencontainers.image.version"},
			{"loopback in the image", "ENV MATE_HTTP_ADDR=0.0.0.0:8080\nUSER", "USER", "MATE_HTTP_ADDR=0.0.0.0:8080"},
			{"shell-form command", `CMD ["/usr/local/bin/matememory"]`, `CMD /usr/local/bin/matememory`, "exec form"},
		}
		for _, tc := range cases {
			if !strings.Contains(string(raw), tc.old) {
				t.Fatalf("%s: the Dockerfile no longer contains %q; update this case", tc.name, tc.old)
			}
			broken := strings.Replace(string(raw), tc.old, tc.new, 1)
			expectErr(t, checkDockerfile(t, []byte(broken)), tc.want)
		}
	})
}

// TestDockerignore: the build context keeps what `go build ./cmd/...` needs.
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	ignored := func(p string) bool {
		out := false
		for _, pat := range patterns {
			neg := strings.HasPrefix(pat, "!")
			pat = strings.TrimPrefix(pat, "!")
			for q := p; q != "." && q != "/"; q = path.Dir(q) {
				m1, _ := path.Match(pat, q)
				m2, _ := path.Match(strings.TrimPrefix(pat, "**/"), path.Base(q))
				if m1 || (strings.HasPrefix(pat, "**/") && m2) {
					out = !neg
				}
			}
		}
		return out
	}
	for _, need := range []string{"go.mod", "go.sum", "cmd/api/main.go", "pkg/internal/config/config.go", "prompts/prompts.go"} {
		if ignored(need) {
			t.Errorf(".dockerignore excludes %s, which the build needs", need)
		}
	}
	for _, skip := range []string{".git/HEAD", "data/matememory.db", "bin/api"} {
		if !ignored(skip) {
			t.Errorf(".dockerignore does not exclude %s", skip)
		}
	}
}
