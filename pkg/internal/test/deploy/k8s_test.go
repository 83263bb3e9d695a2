package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/matememory/matememory/pkg/internal/config"
)

// manifests is one kustomize build, every object decoded into its API type.
type manifests struct {
	dir           string
	deployments   map[string]*appsv1.Deployment
	jobs          map[string]*batchv1.Job
	services      map[string]*corev1.Service
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	namespaces    map[string]*corev1.Namespace
	pdbs          map[string]*policyv1.PodDisruptionBudget
	hpas          map[string]*autoscalingv2.HorizontalPodAutoscaler
	scaledObjects map[string]*scaledObject
	// namespaced lists every namespaced object as kind/name → namespace.
	namespaced map[string]string
}

// scaledObject is KEDA's ScaledObject (keda.sh/v1alpha1), the fields of its CRD that a
// manifest may set; decoding refuses any other field.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval  *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod   *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount  *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount  *int32 `json:"maxReplicaCount,omitempty"`
		Advanced         *struct {
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Fallback *struct {
			FailureThreshold int32 `json:"failureThreshold"`
			Replicas         int32 `json:"replicas"`
		} `json:"fallback,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			MetricType        string            `json:"metricType,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// natsJetStreamTrigger lists KEDA's nats-jetstream scaler parameters: required ones true.
var natsJetStreamTrigger = map[string]bool{
	"natsServerMonitoringEndpoint": true,
	"account":                      true,
	"stream":                       true,
	"consumer":                     true,
	"lagThreshold":                 false,
	"activationLagThreshold":       false,
	"useHttps":                     false,
}

// kustomizeBuild runs a real kustomize build of dir (relative to deploy/) and decodes it.
func kustomizeBuild(t testing.TB, dir string) (*manifests, [][]byte) {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("kustomize build %s: %s/%s: %v", dir, r.GetKind(), r.GetName(), err)
		}
		docs = append(docs, y)
	}
	ms, err := decodeManifests(dir, docs)
	if err != nil {
		t.Fatal(err)
	}
	return ms, docs
}

// decodeManifests decodes each document strictly (unknown or duplicate fields are errors)
// into the API type of its apiVersion and kind; any other kind is refused.
func decodeManifests(dir string, docs [][]byte) (*manifests, error) {
	ms := &manifests{
		dir:         dir,
		deployments: map[string]*appsv1.Deployment{}, jobs: map[string]*batchv1.Job{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, namespaces: map[string]*corev1.Namespace{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		scaledObjects: map[string]*scaledObject{}, namespaced: map[string]string{},
	}
	for _, doc := range docs {
		var tm metav1.TypeMeta
		if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		var obj metav1.Object
		var into any
		var register func()
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/Deployment":
			o := &appsv1.Deployment{}
			into, obj = o, o
			register = func() { ms.deployments[o.Name] = o }
		case "batch/v1/Job":
			o := &batchv1.Job{}
			into, obj = o, o
			register = func() { ms.jobs[o.Name] = o }
		case "v1/Service":
			o := &corev1.Service{}
			into, obj = o, o
			register = func() { ms.services[o.Name] = o }
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			into, obj = o, o
			register = func() { ms.configMaps[o.Name] = o }
		case "v1/Secret":
			o := &corev1.Secret{}
			into, obj = o, o
			register = func() { ms.secrets[o.Name] = o }
		case "v1/Namespace":
			o := &corev1.Namespace{}
			into, obj = o, o
			register = func() { ms.namespaces[o.Name] = o }
		case "policy/v1/PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			into, obj = o, o
			register = func() { ms.pdbs[o.Name] = o }
		case "autoscaling/v2/HorizontalPodAutoscaler":
			o := &autoscalingv2.HorizontalPodAutoscaler{}
			into, obj = o, o
			register = func() { ms.hpas[o.Name] = o }
		case "keda.sh/v1alpha1/ScaledObject":
			o := &scaledObject{}
			into, obj = o, o
			register = func() { ms.scaledObjects[o.Name] = o }
		default:
			return nil, fmt.Errorf("%s: %s %s is not a kind these tests know how to validate; add it to decodeManifests", dir, tm.APIVersion, tm.Kind)
		}
		if err := sigsyaml.UnmarshalStrict(doc, into); err != nil {
			return nil, fmt.Errorf("%s: %s: does not match the %s schema: %w", dir, tm.Kind, tm.APIVersion, err)
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("%s: a %s has no metadata.name", dir, tm.Kind)
		}
		register()
		if tm.Kind != "Namespace" {
			ms.namespaced[tm.Kind+"/"+obj.GetName()] = obj.GetNamespace()
		}
	}
	return ms, nil
}

// exampleSecrets decodes base/secret.example.yaml, the Secrets the operator creates (one
// YAML document each).
func exampleSecrets(t testing.TB) map[string]*corev1.Secret {
	t.Helper()
	raw, err := os.ReadFile("k8s/base/secret.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Secret{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		s := &corev1.Secret{}
		if err := sigsyaml.UnmarshalStrict([]byte(doc), s); err != nil {
			t.Fatalf("secret.example.yaml: %v", err)
		}
		if s.APIVersion != "v1" || s.Kind != "Secret" || s.Name == "" {
			t.Fatalf("secret.example.yaml: not a v1 Secret with a name: %s/%s %q", s.APIVersion, s.Kind, s.Name)
		}
		for k, v := range s.StringData {
			// Placeholders only: a DSN password or key must say CHANGE-ME, or be empty (user
			// names are not secrets).
			if v != "" && !strings.Contains(v, "CHANGE-ME") && k != "MATE_NATS_USER" {
				t.Errorf("secret.example.yaml: %s holds a value without a CHANGE-ME placeholder; never commit real secrets", k)
			}
		}
		if len(s.Data) > 0 {
			t.Errorf("secret.example.yaml: use stringData placeholders, not base64 data")
		}
		out[s.Name] = s
	}
	return out
}

// componentOf is a workload's app.kubernetes.io/component label.
func componentOf(l map[string]string) string { return l["app.kubernetes.io/component"] }

// llmComponents call the LLM and so must outlive its timeout when asked to stop.
var llmComponents = map[string]bool{"api": true, "summarizer": true, "emergence": true}

// checkManifests runs every cross-check on one build.
func checkManifests(t testing.TB, ms *manifests, secrets map[string]*corev1.Secret) []error {
	t.Helper()
	var errs []error
	known := settingEnv(t)
	cmds := cmdNames(t)
	if len(ms.secrets) > 0 {
		errs = append(errs, fmt.Errorf("%s: the build contains Secret(s) %v; secrets are created by the operator, never committed", ms.dir, sortedKeys(ms.secrets)))
	}
	for _, c := range []string{"api", "summarizer", "emergence", "scheduler"} {
		if _, ok := ms.deployments["matememory-"+c]; !ok {
			errs = append(errs, fmt.Errorf("%s: no Deployment matememory-%s", ms.dir, c))
		}
	}
	if _, ok := ms.jobs["matememory-migrate"]; !ok {
		errs = append(errs, fmt.Errorf("%s: no migrate Job", ms.dir))
	}
	for _, name := range sortedKeys(ms.deployments) {
		d := ms.deployments[name]
		where := ms.dir + ": Deployment " + name
		errs = append(errs, checkSelector(where, d.Spec.Selector, d.Spec.Template.Labels)...)
		cfgs, perrs := checkPod(where, d.Spec.Template.Spec, ms, secrets, known, cmds, true)
		errs = append(errs, perrs...)
		comp := componentOf(d.Spec.Template.Labels)
		for _, cfg := range cfgs {
			grace := int64(30)
			if d.Spec.Template.Spec.TerminationGracePeriodSeconds != nil {
				grace = *d.Spec.Template.Spec.TerminationGracePeriodSeconds
			}
			if llmComponents[comp] && float64(grace) <= cfg.Mate.LLM.TimeoutSeconds {
				errs = append(errs, fmt.Errorf("%s: terminationGracePeriodSeconds %d does not exceed the LLM timeout %vs: SIGKILL would cut in-flight extractions", where, grace, cfg.Mate.LLM.TimeoutSeconds))
			}
		}
		if len(d.Spec.Template.Spec.Containers) > 0 {
			if bin, err := binaryOf(d.Spec.Template.Spec.Containers[0].Command, cmds); err == nil && bin != comp {
				errs = append(errs, fmt.Errorf("%s: component label %q runs binary %q", where, comp, bin))
			}
		}
		if d.Spec.Replicas != nil && *d.Spec.Replicas < 1 {
			errs = append(errs, fmt.Errorf("%s: replicas %d", where, *d.Spec.Replicas))
		}
	}
	for _, name := range sortedKeys(ms.jobs) {
		j := ms.jobs[name]
		where := ms.dir + ": Job " + name
		spec := j.Spec.Template.Spec
		if spec.RestartPolicy != corev1.RestartPolicyOnFailure && spec.RestartPolicy != corev1.RestartPolicyNever {
			errs = append(errs, fmt.Errorf("%s: restartPolicy %q; a Job needs OnFailure or Never", where, spec.RestartPolicy))
		}
		_, perrs := checkPod(where, spec, ms, secrets, known, cmds, false)
		errs = append(errs, perrs...)
		if name == "matememory-migrate" && len(spec.Containers) > 0 && strings.Join(spec.Containers[0].Command, " ") != migrateCommand {
			errs = append(errs, fmt.Errorf("%s: command %v; expected [%s]", where, spec.Containers[0].Command, migrateCommand))
		}
	}
	errs = append(errs, checkPDBs(ms)...)
	errs = append(errs, checkServices(ms)...)
	errs = append(errs, checkAutoscalers(ms)...)
	for _, name := range sortedKeys(ms.configMaps) {
		if len(ms.configMaps[name].Data) == 0 {
			errs = append(errs, fmt.Errorf("%s: ConfigMap %s is empty", ms.dir, name))
		}
	}
	return errs
}

func checkSelector(where string, sel *metav1.LabelSelector, podLabels map[string]string) []error {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || sel == nil || s.Empty() {
		return []error{fmt.Errorf("%s: selector %v is empty or invalid: %v", where, sel, err)}
	}
	if !s.Matches(labels.Set(podLabels)) {
		return []error{fmt.Errorf("%s: selector %s does not match the pod template labels %v", where, s, podLabels)}
	}
	return nil
}

// checkPod checks a pod template and returns the configuration each MateMemory container
// would load.
func checkPod(where string, spec corev1.PodSpec, ms *manifests, secrets map[string]*corev1.Secret, known map[string]string, cmds []string, serving bool) ([]config.Config, []error) {
	var errs []error
	var cfgs []config.Config
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		errs = append(errs, fmt.Errorf("%s: securityContext.runAsNonRoot must be true", where))
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		errs = append(errs, fmt.Errorf("%s: securityContext.runAsUser must be a non-zero uid (the image's 65532)", where))
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		errs = append(errs, fmt.Errorf("%s: automountServiceAccountToken should be false: MateMemory never calls the Kubernetes API", where))
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.ConfigMap != nil {
			if _, ok := ms.configMaps[v.ConfigMap.Name]; !ok {
				errs = append(errs, fmt.Errorf("%s: volume %s mounts ConfigMap %s, which the build does not contain", where, v.Name, v.ConfigMap.Name))
			}
		}
	}
	if len(spec.Containers) == 0 {
		return nil, append(errs, fmt.Errorf("%s: no containers", where))
	}
	for _, c := range spec.Containers {
		cw := where + " container " + c.Name
		if _, err := binaryOf(c.Command, cmds); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cw, err))
		}
		if c.Image == "" || c.Image == "matememory" || !strings.Contains(path.Base(c.Image), ":") {
			errs = append(errs, fmt.Errorf("%s: image %q must name a registry and tag (kustomize images)", cw, c.Image))
		}
		errs = append(errs, checkResources(cw, c.Resources)...)
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			errs = append(errs, fmt.Errorf("%s: securityContext.readOnlyRootFilesystem must be true", cw))
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			errs = append(errs, fmt.Errorf("%s: securityContext.allowPrivilegeEscalation must be false", cw))
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			errs = append(errs, fmt.Errorf("%s: securityContext.capabilities.drop must be [ALL]", cw))
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok {
				errs = append(errs, fmt.Errorf("%s: volumeMount %s names no volume", cw, vm.Name))
			}
			mounts[vm.MountPath] = vm
		}

		env, eerrs := containerEnv(cw, c, ms, secrets)
		errs = append(errs, eerrs...)
		errs = append(errs, checkEnvNames(cw, env, known)...)
		file, raw, ferr := configFile(cw, env, mounts, volumes, ms)
		if ferr != nil {
			errs = append(errs, ferr)
			continue
		}
		if raw != nil {
			set, err := fileSettings(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", cw, env[configEnv], err))
			}
			errs = append(errs, checkSetOnce(cw, set, env, known)...)
		}
		cfg, err := loadSettings(cw, file, env)
		if file != "" {
			os.Remove(file)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, checkDeployedSettings(cw, cfg, slices.Contains(c.Command, "migrate") || slices.Contains(c.Args, "migrate"))...)
		cfgs = append(cfgs, cfg)
		if serving {
			errs = append(errs, checkProbes(cw, c, cfg)...)
		}
	}
	return cfgs, errs
}

func checkResources(where string, r corev1.ResourceRequirements) []error {
	var errs []error
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := r.Requests[name]
		lim, hasLim := r.Limits[name]
		if !hasReq || req.IsZero() {
			errs = append(errs, fmt.Errorf("%s: resources.requests.%s is not set", where, name))
		}
		if !hasLim || lim.IsZero() {
			errs = append(errs, fmt.Errorf("%s: resources.limits.%s is not set", where, name))
		}
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			errs = append(errs, fmt.Errorf("%s: resources.requests.%s %s exceeds the limit %s", where, name, req.String(), lim.String()))
		}
	}
	return errs
}

// containerEnv resolves a container's environment from envFrom (ConfigMaps of the build,
// the example Secret) and env.
func containerEnv(where string, c corev1.Container, ms *manifests, secrets map[string]*corev1.Secret) (map[string]string, []error) {
	env := map[string]string{}
	var errs []error
	for _, ef := range c.EnvFrom {
		if ef.Prefix != "" {
			errs = append(errs, fmt.Errorf("%s: envFrom prefix %q would rename the settings", where, ef.Prefix))
		}
		switch {
		case ef.ConfigMapRef != nil:
			cm, ok := ms.configMaps[ef.ConfigMapRef.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: envFrom ConfigMap %s is not in the build", where, ef.ConfigMapRef.Name))
				continue
			}
			for k, v := range cm.Data {
				env[k] = v
			}
		case ef.SecretRef != nil:
			s, ok := secrets[ef.SecretRef.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: envFrom Secret %s is not documented in base/secret.example.yaml", where, ef.SecretRef.Name))
				continue
			}
			for k, v := range s.StringData {
				env[k] = v
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			errs = append(errs, fmt.Errorf("%s: env %s uses valueFrom, which these tests cannot resolve; use envFrom", where, e.Name))
			continue
		}
		env[e.Name] = e.Value
	}
	return env, errs
}

// configFile writes the ConfigMap file MATE_CONFIG points at to a temporary file, so that the
// loader reads exactly what the pod would.
func configFile(where string, env map[string]string, mounts map[string]corev1.VolumeMount, volumes map[string]corev1.Volume, ms *manifests) (string, []byte, error) {
	p, ok := env[configEnv]
	if !ok {
		return "", nil, nil
	}
	vm, ok := mounts[path.Dir(p)]
	if !ok {
		return "", nil, fmt.Errorf("%s: %s=%s but nothing is mounted at %s", where, configEnv, p, path.Dir(p))
	}
	v := volumes[vm.Name]
	if v.ConfigMap == nil {
		return "", nil, fmt.Errorf("%s: %s is mounted from volume %s, which is not a ConfigMap", where, path.Dir(p), vm.Name)
	}
	cm, ok := ms.configMaps[v.ConfigMap.Name]
	if !ok {
		return "", nil, fmt.Errorf("%s: ConfigMap %s is not in the build", where, v.ConfigMap.Name)
	}
	data, ok := cm.Data[path.Base(p)]
	if !ok {
		return "", nil, fmt.Errorf("%s: ConfigMap %s has no key %s (it has %v)", where, cm.Name, path.Base(p), sortedKeys(cm.Data))
	}
	f, err := os.CreateTemp("", "matememory-*.yaml")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		return "", nil, err
	}
	return f.Name(), []byte(data), nil
}

// checkProbes: readiness on /readyz, liveness on /healthz, both on the port the binary
// listens on (mate.http.addr).
func checkProbes(where string, c corev1.Container, cfg config.Config) []error {
	var errs []error
	_, portStr, _ := net.SplitHostPort(cfg.Mate.HTTP.Addr)
	listen, _ := strconv.Atoi(portStr)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	check := func(kind string, p *corev1.Probe, wantPath string) {
		if p == nil || p.HTTPGet == nil {
			errs = append(errs, fmt.Errorf("%s: no %s probe (httpGet %s)", where, kind, wantPath))
			return
		}
		if p.HTTPGet.Path != wantPath {
			errs = append(errs, fmt.Errorf("%s: %s probe path %s; expected %s", where, kind, p.HTTPGet.Path, wantPath))
		}
		port := p.HTTPGet.Port.IntVal
		if p.HTTPGet.Port.StrVal != "" {
			var ok bool
			if port, ok = ports[p.HTTPGet.Port.StrVal]; !ok {
				errs = append(errs, fmt.Errorf("%s: %s probe port %q names no container port", where, kind, p.HTTPGet.Port.StrVal))
				return
			}
		}
		if int(port) != listen {
			errs = append(errs, fmt.Errorf("%s: %s probe port %d, but the binary listens on %s (mate.http.addr)", where, kind, port, cfg.Mate.HTTP.Addr))
		}
	}
	check("readiness", c.ReadinessProbe, "/readyz")
	check("liveness", c.LivenessProbe, "/healthz")
	if c.StartupProbe != nil {
		check("startup", c.StartupProbe, "/healthz")
	}
	return errs
}

// checkPDBs: every Deployment has exactly one PodDisruptionBudget selecting its pods, and
// every budget selects some Deployment's pods.
func checkPDBs(ms *manifests) []error {
	var errs []error
	covered := map[string]int{}
	for _, name := range sortedKeys(ms.pdbs) {
		p := ms.pdbs[name]
		s, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || p.Spec.Selector == nil || s.Empty() {
			errs = append(errs, fmt.Errorf("%s: PodDisruptionBudget %s: empty or invalid selector: %v", ms.dir, name, err))
			continue
		}
		if (p.Spec.MaxUnavailable == nil) == (p.Spec.MinAvailable == nil) {
			errs = append(errs, fmt.Errorf("%s: PodDisruptionBudget %s must set exactly one of maxUnavailable and minAvailable", ms.dir, name))
		}
		matched := 0
		for _, dn := range sortedKeys(ms.deployments) {
			if s.Matches(labels.Set(ms.deployments[dn].Spec.Template.Labels)) {
				matched++
				covered[dn]++
			}
		}
		if matched == 0 {
			errs = append(errs, fmt.Errorf("%s: PodDisruptionBudget %s: selector %s matches no Deployment's pods", ms.dir, name, s))
		}
	}
	for _, dn := range sortedKeys(ms.deployments) {
		if covered[dn] != 1 {
			errs = append(errs, fmt.Errorf("%s: Deployment %s is covered by %d PodDisruptionBudgets; expected 1", ms.dir, dn, covered[dn]))
		}
	}
	return errs
}

// checkServices: every Service selects some Deployment's pods, on a port they expose.
func checkServices(ms *manifests) []error {
	var errs []error
	for _, name := range sortedKeys(ms.services) {
		svc := ms.services[name]
		if len(svc.Spec.Selector) == 0 {
			errs = append(errs, fmt.Errorf("%s: Service %s has no selector", ms.dir, name))
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var pods []corev1.PodTemplateSpec
		for _, dn := range sortedKeys(ms.deployments) {
			if sel.Matches(labels.Set(ms.deployments[dn].Spec.Template.Labels)) {
				pods = append(pods, ms.deployments[dn].Spec.Template)
			}
		}
		if len(pods) == 0 {
			errs = append(errs, fmt.Errorf("%s: Service %s: selector %s matches no Deployment's pods", ms.dir, name, sel))
			continue
		}
		for _, sp := range svc.Spec.Ports {
			for _, pod := range pods {
				found := false
				for _, c := range pod.Spec.Containers {
					for _, cp := range c.Ports {
						if (sp.TargetPort.StrVal != "" && cp.Name == sp.TargetPort.StrVal) || (sp.TargetPort.StrVal == "" && cp.ContainerPort == sp.TargetPort.IntVal) {
							found = true
						}
					}
				}
				if !found {
					errs = append(errs, fmt.Errorf("%s: Service %s port %s: target port %s is not a port of pods %v", ms.dir, name, sp.Name, sp.TargetPort.String(), pod.Labels))
				}
			}
		}
	}
	return errs
}

// checkAutoscalers: each autoscaler targets an existing Deployment that leaves its replica
// count to it, and no Deployment has two.
func checkAutoscalers(ms *manifests) []error {
	var errs []error
	owners := map[string][]string{}
	target := func(who, kind, name string) *appsv1.Deployment {
		if kind != "" && kind != "Deployment" {
			errs = append(errs, fmt.Errorf("%s: %s scales a %s; expected a Deployment", ms.dir, who, kind))
			return nil
		}
		d, ok := ms.deployments[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s scales Deployment %s, which the build does not contain", ms.dir, who, name))
			return nil
		}
		owners[name] = append(owners[name], who)
		if d.Spec.Replicas != nil {
			errs = append(errs, fmt.Errorf("%s: Deployment %s sets replicas %d but %s owns its replica count: every apply would reset it", ms.dir, name, *d.Spec.Replicas, who))
		}
		return d
	}
	for _, name := range sortedKeys(ms.hpas) {
		h := ms.hpas[name]
		who := "HorizontalPodAutoscaler " + name
		d := target(who, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			errs = append(errs, fmt.Errorf("%s: %s: need 1 <= minReplicas <= maxReplicas", ms.dir, who))
		}
		for _, m := range h.Spec.Metrics {
			if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && d != nil {
				for _, c := range d.Spec.Template.Spec.Containers {
					if _, ok := c.Resources.Requests[m.Resource.Name]; !ok {
						errs = append(errs, fmt.Errorf("%s: %s scales on %s utilization but container %s requests no %s", ms.dir, who, m.Resource.Name, c.Name, m.Resource.Name))
					}
				}
			}
		}
		if len(h.Spec.Metrics) == 0 {
			errs = append(errs, fmt.Errorf("%s: %s has no metrics", ms.dir, who))
		}
	}
	for _, name := range sortedKeys(ms.scaledObjects) {
		so := ms.scaledObjects[name]
		who := "ScaledObject " + name
		target(who, so.Spec.ScaleTargetRef.Kind, so.Spec.ScaleTargetRef.Name)
		minR, maxR := int32(0), int32(100) // KEDA's defaults
		if so.Spec.MinReplicaCount != nil {
			minR = *so.Spec.MinReplicaCount
		}
		if so.Spec.MaxReplicaCount != nil {
			maxR = *so.Spec.MaxReplicaCount
		}
		if minR > maxR {
			errs = append(errs, fmt.Errorf("%s: %s: minReplicaCount %d > maxReplicaCount %d", ms.dir, who, minR, maxR))
		}
		if len(so.Spec.Triggers) == 0 {
			errs = append(errs, fmt.Errorf("%s: %s has no triggers", ms.dir, who))
		}
		for i, tr := range so.Spec.Triggers {
			tw := fmt.Sprintf("%s trigger %d (%s)", who, i, tr.Type)
			if tr.Type != "nats-jetstream" {
				errs = append(errs, fmt.Errorf("%s: %s: only nats-jetstream triggers are expected", ms.dir, tw))
				continue
			}
			for _, k := range sortedKeys(tr.Metadata) {
				if _, ok := natsJetStreamTrigger[k]; !ok {
					errs = append(errs, fmt.Errorf("%s: %s: unknown parameter %q (known: %v)", ms.dir, tw, k, sortedKeys(natsJetStreamTrigger)))
				}
			}
			for _, k := range sortedKeys(natsJetStreamTrigger) {
				if natsJetStreamTrigger[k] && tr.Metadata[k] == "" && tr.AuthenticationRef == nil {
					errs = append(errs, fmt.Errorf("%s: %s: required parameter %s is missing", ms.dir, tw, k))
				}
			}
			for _, k := range []string{"lagThreshold", "activationLagThreshold"} {
				if v, ok := tr.Metadata[k]; ok {
					if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || (k == "lagThreshold" && n == 0) {
						errs = append(errs, fmt.Errorf("%s: %s: %s %q is not a positive whole number", ms.dir, tw, k, v))
					}
				}
			}
			if v, ok := tr.Metadata["useHttps"]; ok {
				if _, err := strconv.ParseBool(v); err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: useHttps %q is not a boolean", ms.dir, tw, v))
				}
			}
			if ep := tr.Metadata["natsServerMonitoringEndpoint"]; ep != "" {
				if _, _, err := net.SplitHostPort(ep); err != nil || strings.Contains(ep, "://") {
					errs = append(errs, fmt.Errorf("%s: %s: natsServerMonitoringEndpoint %q must be host:port without a scheme", ms.dir, tw, ep))
				}
			}
		}
	}
	for _, dn := range sortedKeys(owners) {
		if len(owners[dn]) > 1 {
			errs = append(errs, fmt.Errorf("%s: Deployment %s has several autoscalers: %v", ms.dir, dn, owners[dn]))
		}
	}
	return errs
}

// envOf returns the value a Deployment's first container gets for name, through its
// envFrom ConfigMaps.
func envOf(ms *manifests, deployment, name string) string {
	d, ok := ms.deployments[deployment]
	if !ok || len(d.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	env, _ := containerEnv("", d.Spec.Template.Spec.Containers[0], ms, nil)
	return env[name]
}

func TestKustomizeBuilds(t *testing.T) {
	secrets := exampleSecrets(t)
	cases := []struct {
		dir        string
		namespace  string
		replicas   string // MATE_NATS_REPLICAS
		autoscaler string // kind scaling the summarizer, "" for none
	}{
		{dir: "k8s/base", replicas: "1"},
		{dir: "k8s/overlays/production", namespace: "matememory", replicas: "3", autoscaler: "ScaledObject"},
		{dir: "k8s/overlays/production-hpa", namespace: "matememory", replicas: "3", autoscaler: "HorizontalPodAutoscaler"},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.dir, "/", "_"), func(t *testing.T) {
			ms, _ := kustomizeBuild(t, tc.dir)
			noErrs(t, checkManifests(t, ms, secrets))

			if got := envOf(ms, "matememory-api", "MATE_NATS_REPLICAS"); got != tc.replicas {
				t.Errorf("MATE_NATS_REPLICAS = %q; expected %q", got, tc.replicas)
			}
			for obj, ns := range ms.namespaced {
				if ns != tc.namespace {
					t.Errorf("%s is in namespace %q; expected %q", obj, ns, tc.namespace)
				}
			}
			if tc.namespace != "" {
				if _, ok := ms.namespaces[tc.namespace]; !ok {
					t.Errorf("the overlay does not create namespace %s", tc.namespace)
				}
			}
			scaled := ""
			for _, h := range ms.hpas {
				if h.Spec.ScaleTargetRef.Name == "matememory-summarizer" {
					scaled = "HorizontalPodAutoscaler"
				}
			}
			for _, so := range ms.scaledObjects {
				if so.Spec.ScaleTargetRef.Name == "matememory-summarizer" {
					scaled = "ScaledObject"
				}
			}
			if scaled != tc.autoscaler {
				t.Errorf("summarizer scaled by %q; expected %q", scaled, tc.autoscaler)
			}
			if tc.namespace != "" {
				for _, d := range ms.deployments {
					for _, c := range d.Spec.Template.Spec.Containers {
						if strings.HasSuffix(c.Image, ":dev") {
							t.Errorf("Deployment %s runs the development image %s; the overlay must pin a release", d.Name, c.Image)
						}
					}
				}
			}
		})
	}
}

// TestKEDATriggerMatchesNATS ties the ScaledObject to the NATS deploy: the monitoring
// endpoint is the Helm chart's headless Service (same release and namespace as the client
// URL the pods use) on the chart's monitoring port.
func TestKEDATriggerMatchesNATS(t *testing.T) {
	ms, _ := kustomizeBuild(t, "k8s/overlays/production")
	values := natsValues(t)
	so, ok := ms.scaledObjects["matememory-summarizer"]
	if !ok || len(so.Spec.Triggers) != 1 {
		t.Fatalf("production overlay: expected the summarizer ScaledObject with one trigger")
	}
	md := so.Spec.Triggers[0].Metadata
	u, err := url.Parse(strings.Split(envOf(ms, "matememory-summarizer", "MATE_NATS_URL"), ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	svc, rest, _ := strings.Cut(u.Hostname(), ".")
	host, port, err := net.SplitHostPort(md["natsServerMonitoringEndpoint"])
	if err != nil {
		t.Fatal(err)
	}
	if want := svc + "-headless." + rest; host != want {
		t.Errorf("natsServerMonitoringEndpoint host %s; expected %s (the chart's headless Service beside MATE_NATS_URL's %s)", host, want, u.Hostname())
	}
	if port != strconv.Itoa(values.Config.Monitor.Port) || !values.Config.Monitor.Enabled {
		t.Errorf("natsServerMonitoringEndpoint port %s; nats-values.yaml serves monitoring on %d (enabled %v)", port, values.Config.Monitor.Port, values.Config.Monitor.Enabled)
	}
	if u.Port() != "4222" {
		t.Errorf("MATE_NATS_URL port %s; the chart's client port is 4222", u.Port())
	}
	if md["account"] != "$G" {
		t.Errorf("account %q: nats-values.yaml configures no accounts, so JetStream runs in $G", md["account"])
	}
	checkStreamNames(t, md["stream"], md["consumer"])
}

// TestManifestChecksFail proves the checks above fire: each case breaks a correct build in one
// way and expects the error that names it.
func TestManifestChecksFail(t *testing.T) {
	secrets := exampleSecrets(t)
	_, docs := kustomizeBuild(t, "k8s/overlays/production")
	fresh := func(t *testing.T) *manifests {
		ms, err := decodeManifests("k8s/overlays/production", docs)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	envCM := func(ms *manifests) *corev1.ConfigMap {
		for _, cm := range ms.configMaps {
			if _, ok := cm.Data["MATE_NATS_URL"]; ok {
				return cm
			}
		}
		t.Fatal("no env ConfigMap")
		return nil
	}
	cases := []struct {
		name   string
		mutate func(ms *manifests)
		want   string
	}{
		{"readiness probe missing", func(ms *manifests) {
			ms.deployments["matememory-api"].Spec.Template.Spec.Containers[0].ReadinessProbe = nil
		}, "no readiness probe"},
		{"liveness on the wrong path", func(ms *manifests) {
			ms.deployments["matememory-scheduler"].Spec.Template.Spec.Containers[0].LivenessProbe.HTTPGet.Path = "/readyz"
		}, "liveness probe path /readyz"},
		{"root user", func(ms *manifests) {
			f := false
			ms.deployments["matememory-emergence"].Spec.Template.Spec.SecurityContext.RunAsNonRoot = &f
		}, "runAsNonRoot must be true"},
		{"writable root filesystem", func(ms *manifests) {
			f := false
			ms.jobs["matememory-migrate"].Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = &f
		}, "readOnlyRootFilesystem must be true"},
		{"no memory limit", func(ms *manifests) {
			delete(ms.deployments["matememory-summarizer"].Spec.Template.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		}, "resources.limits.memory is not set"},
		{"request above limit", func(ms *manifests) {
			ms.deployments["matememory-api"].Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("8")
		}, "exceeds the limit"},
		{"grace period below the LLM timeout", func(ms *manifests) {
			g := int64(60)
			ms.deployments["matememory-summarizer"].Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "does not exceed the LLM timeout"},
		{"misspelt setting", func(ms *manifests) {
			cm := envCM(ms)
			cm.Data["MATE_NATS_URLS"] = cm.Data["MATE_NATS_URL"]
		}, "MATE_NATS_URLS is not a MateMemory setting"},
		{"invalid setting value", func(ms *manifests) {
			envCM(ms).Data["MATE_NATS_REPLICAS"] = "2"
		}, "mate.nats.replicas"},
		{"embedded NATS", func(ms *manifests) {
			envCM(ms).Data["MATE_NATS_URL"] = ""
		}, "would start its own embedded NATS"},
		{"setting in file and env", func(ms *manifests) {
			envCM(ms).Data["MATE_LLM_MODEL"] = "gpt-4o"
		}, "mate.llm.model is set in the configuration file and as MATE_LLM_MODEL"},
		{"unknown Secret", func(ms *manifests) {
			ms.deployments["matememory-api"].Spec.Template.Spec.Containers[0].EnvFrom[1].SecretRef.Name = "other"
		}, "envFrom Secret other is not documented"},
		{"binary that does not exist", func(ms *manifests) {
			ms.deployments["matememory-api"].Spec.Template.Spec.Containers[0].Command = []string{"/usr/local/bin/apid"}
		}, "runs no binary of the image"},
		{"PDB selecting nothing", func(ms *manifests) {
			ms.pdbs["matememory-scheduler"].Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "schedular"
		}, "matches no Deployment's pods"},
		{"Service selecting nothing", func(ms *manifests) {
			ms.services["matememory-api"].Spec.Selector["app.kubernetes.io/component"] = "apis"
		}, "Service matememory-api: selector"},
		{"Service on a port the pods lack", func(ms *manifests) {
			ms.services["matememory-api"].Spec.Ports[0].TargetPort.StrVal = "metrics"
		}, "target port metrics"},
		{"autoscaled Deployment with replicas", func(ms *manifests) {
			r := int32(2)
			ms.deployments["matememory-summarizer"].Spec.Replicas = &r
		}, "owns its replica count"},
		{"trigger without consumer", func(ms *manifests) {
			delete(ms.scaledObjects["matememory-summarizer"].Spec.Triggers[0].Metadata, "consumer")
		}, "required parameter consumer is missing"},
		{"trigger with a misspelt parameter", func(ms *manifests) {
			ms.scaledObjects["matememory-summarizer"].Spec.Triggers[0].Metadata["lagTreshold"] = "5"
		}, `unknown parameter "lagTreshold"`},
		{"autoscaler of a missing Deployment", func(ms *manifests) {
			ms.scaledObjects["matememory-summarizer"].Spec.ScaleTargetRef.Name = "summarizer"
		}, "scales Deployment summarizer, which the build does not contain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := fresh(t)
			noErrsBefore := checkManifests(t, ms, secrets)
			if len(noErrsBefore) > 0 {
				t.Fatalf("the unbroken build already fails: %v", noErrsBefore)
			}
			ms = fresh(t)
			tc.mutate(ms)
			expectErr(t, checkManifests(t, ms, secrets), tc.want)
		})
	}

	t.Run("unknown field", func(t *testing.T) {
		var broken [][]byte
		for _, d := range docs {
			if strings.Contains(string(d), "kind: Deployment") {
				d = []byte(strings.Replace(string(d), "spec:\n", "spec:\n  replica: 3\n", 1))
			}
			broken = append(broken, d)
		}
		if _, err := decodeManifests("broken", broken); err == nil || !strings.Contains(err.Error(), "replica") {
			t.Errorf("a Deployment with the unknown field spec.replica decoded: %v", err)
		}
	})
	t.Run("unknown kind", func(t *testing.T) {
		doc := []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n")
		if _, err := decodeManifests("broken", [][]byte{doc}); err == nil {
			t.Error("a kind without checks decoded")
		}
	})
}

// TestBaseFilesListed: every manifest in base/ and the components is used by a build (a file
// forgotten in kustomization.yaml would never be deployed), except the Secret example.
func TestBaseFilesListed(t *testing.T) {
	for _, dir := range []string{"k8s/base", "k8s/components/keda-summarizer", "k8s/components/hpa-summarizer"} {
		raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Resources []string `json:"resources"`
		}
		if err := sigsyaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{"kustomization.yaml": true, "secret.example.yaml": true}
		for _, r := range k.Resources {
			listed[r] = true
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") && !listed[e.Name()] {
				t.Errorf("%s/%s is not listed in its kustomization.yaml", dir, e.Name())
			}
		}
	}
}
