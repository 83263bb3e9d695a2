package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// natsChartValues mirrors the keys of the official NATS Helm chart's values.yaml (nats-io/k8s,
// chart "nats" 1.x) that deploy/k8s/nats-values.yaml sets. Decoding refuses any other key, so
// a misspelt or 0.x-layout key (nats.jetstream.fileStorage, cluster.enabled at the top) fails
// here instead of being ignored by helm.
type natsChartValues struct {
	Config struct {
		Cluster struct {
			Enabled  bool `json:"enabled"`
			Port     int  `json:"port,omitempty"`
			Replicas int  `json:"replicas"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				Enabled bool   `json:"enabled"`
				Dir     string `json:"dir"`
				MaxSize string `json:"maxSize,omitempty"`
				PVC     struct {
					Enabled          bool    `json:"enabled"`
					Size             string  `json:"size"`
					StorageClassName *string `json:"storageClassName"`
				} `json:"pvc"`
			} `json:"fileStore"`
			MemoryStore struct {
				Enabled bool   `json:"enabled"`
				MaxSize string `json:"maxSize,omitempty"`
			} `json:"memoryStore"`
			// Merge is merged into the server's jetstream {} block.
			Merge map[string]any `json:"merge"`
		} `json:"jetstream"`
		Monitor struct {
			Enabled bool `json:"enabled"`
			Port    int  `json:"port"`
		} `json:"monitor"`
		// Merge is merged into the top of the server configuration (authorization).
		Merge map[string]any `json:"merge"`
	} `json:"config"`
	Container struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
		Merge struct {
			Resources corev1.ResourceRequirements `json:"resources"`
		} `json:"merge"`
		// Env of the NATS container (the users' passwords, from a Secret).
		Env []corev1.EnvVar `json:"env"`
	} `json:"container"`
	PodTemplate struct {
		TopologySpreadConstraints map[string]struct {
			MaxSkew           int    `json:"maxSkew"`
			WhenUnsatisfiable string `json:"whenUnsatisfiable"`
		} `json:"topologySpreadConstraints"`
	} `json:"podTemplate"`
	PodDisruptionBudget struct {
		Enabled bool `json:"enabled"`
	} `json:"podDisruptionBudget"`
	NatsBox struct {
		Enabled bool `json:"enabled"`
	} `json:"natsBox"`
}

func parseNATSValues(raw []byte) (*natsChartValues, error) {
	v := &natsChartValues{}
	if err := sigsyaml.UnmarshalStrict(raw, v); err != nil {
		return nil, fmt.Errorf("k8s/nats-values.yaml does not match the NATS chart's values: %w", err)
	}
	return v, nil
}

func natsValues(t testing.TB) *natsChartValues {
	t.Helper()
	raw, err := os.ReadFile("k8s/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseNATSValues(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// chartServerConfig renders the server configuration the chart builds from the values (the
// parts they set: JetStream store and merged keys, cluster routes, monitoring) for one pod.
func chartServerConfig(v *natsChartValues, pod int) (string, error) {
	js := map[string]any{"store_dir": v.Config.JetStream.FileStore.Dir}
	for k, val := range v.Config.JetStream.Merge {
		js[k] = val
	}
	jsJSON, err := json.Marshal(js)
	if err != nil {
		return "", err
	}
	var routes []string
	for i := 0; i < v.Config.Cluster.Replicas; i++ {
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats://nats-%d.nats-headless:6222", i)))
	}
	top := ""
	for _, k := range sortedKeys(v.Config.Merge) {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v.Config.Merge[k]); err != nil {
			return "", err
		}
		b := strings.TrimSpace(buf.String())
		// The chart writes << $VAR >> unquoted: a variable the server reads from its environment.
		top += k + ": " + chartVariable.ReplaceAllString(b, "$1") + "\n"
	}
	return fmt.Sprintf(`server_name: "nats-%d"
port: 4222
http_port: %d
jetstream: %s
cluster {
  name: "nats"
  port: 6222
  routes: [%s]
}
%s`, pod, v.Config.Monitor.Port, jsJSON, strings.Join(routes, ", "), top), nil
}

var chartVariable = regexp.MustCompile(`"<<\s*(\$[A-Za-z_][A-Za-z0-9_]*)\s*>>"`)

// checkNATSValues checks the chart values and returns the server options nats-server derives.
func checkNATSValues(v *natsChartValues) (*server.Options, []error) {
	var errs []error
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 {
		errs = append(errs, fmt.Errorf("nats-values.yaml: config.cluster must be enabled with 3 replicas (R3 streams need three nodes); got enabled=%v replicas=%d", c.Cluster.Enabled, c.Cluster.Replicas))
	}
	if !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled || c.JetStream.FileStore.Dir == "" {
		errs = append(errs, fmt.Errorf("nats-values.yaml: JetStream must be enabled with a file store on a persistent volume claim"))
	}
	if c.JetStream.FileStore.PVC.Size == "" {
		errs = append(errs, fmt.Errorf("nats-values.yaml: config.jetstream.fileStore.pvc.size is not set"))
	}
	if c.JetStream.MemoryStore.Enabled {
		errs = append(errs, fmt.Errorf("nats-values.yaml: the memory store is enabled; MateMemory's streams are file-backed"))
	}
	if !c.Monitor.Enabled || c.Monitor.Port == 0 {
		errs = append(errs, fmt.Errorf("nats-values.yaml: config.monitor must be enabled: KEDA reads consumer lag from it"))
	}
	if v.Container.Image.Repository != "nats" || v.Container.Image.Tag == "" {
		errs = append(errs, fmt.Errorf("nats-values.yaml: container.image must be the official nats image with a pinned tag"))
	}
	if r := v.Container.Merge.Resources; r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() || r.Requests.Cpu().IsZero() {
		errs = append(errs, fmt.Errorf("nats-values.yaml: container.merge.resources needs cpu and memory requests and a memory limit"))
	}
	if len(v.PodTemplate.TopologySpreadConstraints) == 0 {
		errs = append(errs, fmt.Errorf("nats-values.yaml: no topologySpreadConstraints: two NATS pods on one Kubernetes node lose a quorum together"))
	}
	if !v.PodDisruptionBudget.Enabled {
		errs = append(errs, fmt.Errorf("nats-values.yaml: podDisruptionBudget must stay enabled"))
	}
	conf, err := chartServerConfig(v, 0)
	if err != nil {
		return nil, append(errs, err)
	}
	// The passwords come from the container's environment (container.env, a Secret).
	for _, e := range v.Container.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			errs = append(errs, fmt.Errorf("nats-values.yaml: container.env %s must come from a Secret (valueFrom.secretKeyRef)", e.Name))
		}
		os.Setenv(e.Name, "test-"+strings.ToLower(e.Name))
		defer os.Unsetenv(e.Name)
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(conf); err != nil {
		return nil, append(errs, fmt.Errorf("nats-values.yaml: nats-server refuses the configuration the chart would render:\n%s\n%w", conf, err))
	}
	if !opts.JetStream || !opts.SyncAlways {
		errs = append(errs, fmt.Errorf("nats-values.yaml: JetStream must fsync every write (config.jetstream.merge.sync_interval: always, the design's durability rule); nats-server reads jetstream=%v sync_always=%v", opts.JetStream, opts.SyncAlways))
	}
	users := map[string]bool{}
	for _, u := range opts.Users {
		users[u.Username] = true
		if u.Password == "" {
			errs = append(errs, fmt.Errorf("nats-values.yaml: NATS user %s has no password", u.Username))
		}
	}
	for _, want := range []string{"matememory-api", "matememory-worker", "chat"} {
		if !users[want] {
			errs = append(errs, fmt.Errorf("nats-values.yaml: no NATS user %s: the cluster must take no anonymous client (config.merge.authorization, as compose/nats/accounts.conf)", want))
		}
	}
	if opts.StoreDir != c.JetStream.FileStore.Dir {
		errs = append(errs, fmt.Errorf("nats-values.yaml: store dir %q, expected %q", opts.StoreDir, c.JetStream.FileStore.Dir))
	}
	return opts, errs
}

func TestNATSHelmValues(t *testing.T) {
	v := natsValues(t)
	_, errs := checkNATSValues(v)
	noErrs(t, errs)
	checkNATSImage(t, "k8s/nats-values.yaml", v.Container.Image.Repository+":"+v.Container.Image.Tag)

	t.Run("checks fail", func(t *testing.T) {
		cases := []struct {
			name   string
			mutate func(v *natsChartValues)
			want   string
		}{
			{"default fsync", func(v *natsChartValues) { delete(v.Config.JetStream.Merge, "sync_interval") }, "must fsync every write"},
			{"invalid sync_interval", func(v *natsChartValues) { v.Config.JetStream.Merge["sync_interval"] = "sometimes" }, "nats-server refuses"},
			{"one node", func(v *natsChartValues) { v.Config.Cluster.Replicas = 1 }, "3 replicas"},
			{"no monitoring", func(v *natsChartValues) { v.Config.Monitor.Enabled = false }, "KEDA reads consumer lag"},
			{"no volume", func(v *natsChartValues) { v.Config.JetStream.FileStore.PVC.Enabled = false }, "persistent volume claim"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				v := natsValues(t)
				tc.mutate(v)
				_, errs := checkNATSValues(v)
				expectErr(t, errs, tc.want)
			})
		}
		if _, err := parseNATSValues([]byte("nats:\n  jetstream:\n    enabled: true\n")); err == nil {
			t.Error("the 0.x chart layout (nats.jetstream) decoded")
		}
		if _, err := parseNATSValues([]byte("config:\n  jetstream:\n    fileStorage:\n      enabled: true\n")); err == nil {
			t.Error("a misspelt key (fileStorage) decoded")
		}
	})
}

// checkNATSImage: the NATS image is the server series the tests run against (go.mod's
// nats-server, e.g. v2.15.x → nats:2.15.x), and at least 2.12.
func checkNATSImage(t *testing.T, where, image string) {
	t.Helper()
	repo, tag, ok := strings.Cut(image, ":")
	if !ok || repo != "nats" {
		t.Errorf("%s: NATS image %q: expected the official nats image with a tag", where, image)
		return
	}
	ver := strings.SplitN(tag, "-", 2)[0]
	parts := strings.Split(ver, ".")
	if len(parts) < 2 {
		t.Errorf("%s: NATS image tag %q must pin at least major.minor", where, tag)
		return
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	if major != 2 || minor < 12 {
		t.Errorf("%s: NATS %s; MateMemory needs 2.12 or later", where, ver)
	}
	// server.VERSION is the nats-server linked into this binary, the one the cluster tests run.
	want := strings.Join(strings.SplitN(server.VERSION, ".", 3)[:2], ".")
	if parts[0]+"."+parts[1] != want {
		t.Errorf("%s: NATS image %s, but the tests run against nats-server %s (go.mod): keep them in one series", where, tag, server.VERSION)
	}
}

// checkStreamNames: the stream and durable consumer an autoscaler watches are the ones the
// summarizer provisions (pkg/internal/bus).
func checkStreamNames(t *testing.T, stream, consumer string) {
	t.Helper()
	if stream != bus.StreamEvents {
		t.Errorf("KEDA trigger stream %q; the summarizer consumes stream %q (bus.StreamEvents)", stream, bus.StreamEvents)
	}
	if consumer != bus.ConsumerSummarizer {
		t.Errorf("KEDA trigger consumer %q; the summarizer's durable consumer is %q (bus.ConsumerSummarizer)", consumer, bus.ConsumerSummarizer)
	}
}
