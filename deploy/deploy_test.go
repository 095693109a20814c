package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// kustomization mirrors the fields of kustomize's Kustomization
// (kustomize.config.k8s.io/v1beta1) the manifests use; the kustomize module
// itself is too large a dependency for this check. Unknown fields fail.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// newObject returns what a document of this apiVersion and kind decodes
// into, or nil for a kind the manifests should not have.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 Service":
		return &corev1.Service{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		return &kustomization{}
	}
	return nil
}

type document struct {
	file string
	n    int // 1-based position in its file
	obj  any
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into out, failing on unknown or
// duplicate fields and on trailing data.
func decodeStrict(doc []byte, out any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the object")
	}
	return nil
}

// load decodes every document of every YAML file in kubernetes/.
func load(t *testing.T) []document {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var docs []document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, part := range separator.Split(string(data), -1) {
			where := fmt.Sprintf("%s, document %d", f, i+1)
			if strings.TrimSpace(stripComments(part)) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(part), &head); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			obj := newObject(head.APIVersion, head.Kind)
			if obj == nil {
				t.Errorf("%s: no decoder for apiVersion %q kind %q", where, head.APIVersion, head.Kind)
				continue
			}
			if err := decodeStrict([]byte(part), obj); err != nil {
				t.Errorf("%s (%s): %v", where, head.Kind, err)
				continue
			}
			docs = append(docs, document{file: filepath.Base(f), n: i + 1, obj: obj})
		}
	}
	return docs
}

func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestManifestsDecodeStrictly(t *testing.T) {
	docs := load(t)
	if len(docs) < 8 {
		t.Fatalf("decoded %d documents, want the etcd, node, router, monitoring and kustomize ones", len(docs))
	}
}

// TestStrictDecodeRejectsMisspelling makes sure the decoding above would
// catch what it is for.
func TestStrictDecodeRejectsMisspelling(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: StatefulSet\nspec:\n  replica: 3\n",
		"apiVersion: v1\nkind: Service\nspec:\n  ports:\n    - name: http\n      prot: 80\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nspec:\n  endpoints:\n    - port: http\n      pth: /metrics\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  name: b\n",
	} {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		if err := decodeStrict([]byte(doc), newObject(head.APIVersion, head.Kind)); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	docs := load(t)
	var k *kustomization
	for _, d := range docs {
		if v, ok := d.obj.(*kustomization); ok {
			k = v
		}
	}
	if k == nil {
		t.Fatal("no kustomization.yaml")
	}
	files, _ := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	for _, f := range files {
		name := filepath.Base(f)
		listed := slices.Contains(k.Resources, name)
		switch {
		case name == "kustomization.yaml":
		case strings.HasSuffix(name, ".example.yaml"):
			if listed {
				t.Errorf("%s is an example and must not be applied", name)
			}
		case !listed:
			t.Errorf("%s is not in kustomization.yaml's resources", name)
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("kubernetes", r)); err != nil {
			t.Errorf("kustomization.yaml: %v", err)
		}
	}
	for _, w := range workloads(docs) {
		for _, c := range w.pod.Spec.Containers {
			if !isYuebing(c) {
				continue
			}
			name, _, _ := strings.Cut(c.Image, ":")
			if !slices.ContainsFunc(k.Images, func(i struct {
				Name    string `json:"name"`
				NewName string `json:"newName,omitempty"`
				NewTag  string `json:"newTag,omitempty"`
				Digest  string `json:"digest,omitempty"`
			}) bool {
				return i.Name == name
			}) {
				t.Errorf("%s: image %s is not under kustomization.yaml's images", w.name, name)
			}
		}
	}
}

type workload struct {
	name     string
	pod      *corev1.PodTemplateSpec
	sts      *appsv1.StatefulSet // nil for a Deployment
	replicas int32
}

func workloads(docs []document) []workload {
	var ws []workload
	for _, d := range docs {
		switch o := d.obj.(type) {
		case *appsv1.StatefulSet:
			ws = append(ws, workload{name: "StatefulSet " + o.Name, pod: &o.Spec.Template, sts: o, replicas: ptrOr(o.Spec.Replicas, 1)})
		case *appsv1.Deployment:
			ws = append(ws, workload{name: "Deployment " + o.Name, pod: &o.Spec.Template, replicas: ptrOr(o.Spec.Replicas, 1)})
		}
	}
	return ws
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func isYuebing(c corev1.Container) bool {
	return strings.Contains(c.Image, "/yuebing/yuebing")
}

// flagValue returns the value of --name=VALUE in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func portNumber(addr string) (int32, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("no port in %q", addr)
	}
	n, err := strconv.ParseInt(addr[i+1:], 10, 32)
	return int32(n), err
}

// containerPort resolves a probe's or Service's port, by name or number,
// against the container's declared ports.
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func TestContainersAreLockedDown(t *testing.T) {
	for _, w := range workloads(load(t)) {
		ps := w.pod.Spec.SecurityContext
		for _, c := range w.pod.Spec.Containers {
			where := w.name + " container " + c.Name
			cs := c.SecurityContext
			nonRoot := (ps != nil && ptrOr(ps.RunAsNonRoot, false)) || (cs != nil && ptrOr(cs.RunAsNonRoot, false))
			if !nonRoot {
				t.Errorf("%s: runAsNonRoot is not set", where)
			}
			uid := int64(-1)
			if ps != nil && ps.RunAsUser != nil {
				uid = *ps.RunAsUser
			}
			if cs != nil && cs.RunAsUser != nil {
				uid = *cs.RunAsUser
			}
			if uid <= 0 {
				t.Errorf("%s: runAsUser %d, want a non-root numeric user", where, uid)
			}
			if cs == nil || !ptrOr(cs.ReadOnlyRootFilesystem, false) || ptrOr(cs.AllowPrivilegeEscalation, true) {
				t.Errorf("%s: want readOnlyRootFilesystem and no privilege escalation", where)
			}
			if cs == nil || cs.Capabilities == nil || !slices.Contains(cs.Capabilities.Drop, "ALL") {
				t.Errorf("%s: capabilities are not all dropped", where)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: want memory requests and limits", where)
			}
			if c.LivenessProbe == nil || c.ReadinessProbe == nil {
				t.Errorf("%s: want liveness and readiness probes", where)
			}
			for _, v := range w.pod.Spec.Volumes {
				if v.Secret != nil && ptrOr(v.Secret.DefaultMode, 0o644)&0o007 != 0 {
					t.Errorf("%s: Secret volume %s is world-readable (defaultMode %#o)", where, v.Name, ptrOr(v.Secret.DefaultMode, 0o644))
				}
			}
			mounts := map[string]bool{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = true
			}
			for name := range mounts {
				found := slices.ContainsFunc(w.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
				if w.sts != nil {
					found = found || slices.ContainsFunc(w.sts.Spec.VolumeClaimTemplates, func(v corev1.PersistentVolumeClaim) bool { return v.Name == name })
				}
				if !found {
					t.Errorf("%s: mounts volume %q, which the pod does not have", where, name)
				}
			}
			// Every $(VAR) the kubelet expands must be defined, or it is
			// passed on literally.
			env := map[string]bool{}
			for _, e := range c.Env {
				env[e.Name] = true
			}
			for _, a := range slices.Concat(c.Command, c.Args) {
				for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(a, -1) {
					if !env[m[1]] {
						t.Errorf("%s: %q uses $(%s), which is not in env", where, a, m[1])
					}
				}
			}
		}
	}
}

// TestProbesAndPorts checks that yuebing's probes ask /healthz and /readyz on
// the port its HTTP listener binds, and that every Service's target port is
// one the pods it selects declare.
func TestProbesAndPorts(t *testing.T) {
	docs := load(t)
	ws := workloads(docs)
	for _, w := range ws {
		for _, c := range w.pod.Spec.Containers {
			if !isYuebing(c) || len(c.Args) == 0 {
				continue
			}
			where := w.name + " container " + c.Name
			var listen, ready string
			switch c.Args[0] {
			case "serve":
				listen, ready = "http-listen", "/readyz"
			case "conductor":
				listen, ready = "listen", "/healthz" // the router has no /readyz
			default:
				t.Errorf("%s: runs %q, want serve or conductor", where, c.Args[0])
				continue
			}
			addr, ok := flagValue(c.Args, listen)
			if !ok {
				t.Errorf("%s: no --%s", where, listen)
				continue
			}
			if !strings.HasPrefix(addr, "0.0.0.0:") && !strings.HasPrefix(addr, ":") {
				t.Errorf("%s: --%s=%s is not reachable from outside the pod", where, listen, addr)
			}
			want, err := portNumber(addr)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			for _, p := range []struct {
				kind  string
				probe *corev1.Probe
				path  string
			}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, ready}, {"startup", c.StartupProbe, "/healthz"}} {
				if p.probe == nil {
					continue
				}
				g := p.probe.HTTPGet
				if g == nil {
					t.Errorf("%s: %s probe is not an HTTP GET", where, p.kind)
					continue
				}
				if g.Path != p.path {
					t.Errorf("%s: %s probe asks %s, want %s", where, p.kind, g.Path, p.path)
				}
				if port, ok := containerPort(c, g.Port); !ok || port != want {
					t.Errorf("%s: %s probe port %s is not the declared port of --%s=%s", where, p.kind, g.Port.String(), listen, addr)
				}
			}
			for flag, portName := range map[string]string{"resp-listen": "resp", "transfer-listen": "transfer"} {
				if addr, ok := flagValue(c.Args, flag); ok && addr != "" {
					n, err := portNumber(addr)
					if p, declared := containerPort(c, intstr.FromString(portName)); err != nil || !declared || p != n {
						t.Errorf("%s: --%s=%s is not the declared port %q", where, flag, addr, portName)
					}
				}
			}
		}
	}
	for _, d := range docs {
		svc, ok := d.obj.(*corev1.Service)
		if !ok {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var pods []workload
		for _, w := range ws {
			if sel.Matches(labels.Set(w.pod.Labels)) {
				pods = append(pods, w)
			}
		}
		if len(pods) == 0 {
			t.Errorf("Service %s selects no pods", svc.Name)
		}
		for _, w := range pods {
			for _, sp := range svc.Spec.Ports {
				if !slices.ContainsFunc(w.pod.Spec.Containers, func(c corev1.Container) bool { _, ok := containerPort(c, sp.TargetPort); return ok }) {
					t.Errorf("Service %s port %s: target %s is no port of %s", svc.Name, sp.Name, sp.TargetPort.String(), w.name)
				}
			}
		}
	}
}

func TestStatefulSets(t *testing.T) {
	docs := load(t)
	services := map[string]*corev1.Service{}
	for _, d := range docs {
		if s, ok := d.obj.(*corev1.Service); ok {
			services[s.Name] = s
		}
	}
	stsByName := map[string]workload{}
	for _, w := range workloads(docs) {
		if w.sts != nil {
			stsByName[w.sts.Name] = w
		}
	}
	for _, w := range stsByName {
		s := services[w.sts.Spec.ServiceName]
		if s == nil || s.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: serviceName %q is not a headless Service", w.name, w.sts.Spec.ServiceName)
		}
		if !labels.SelectorFromSet(w.sts.Spec.Selector.MatchLabels).Matches(labels.Set(w.pod.Labels)) {
			t.Errorf("%s: selector does not match its pods", w.name)
		}
	}
	nodes, ok := stsByName["yuebing"]
	if !ok {
		t.Fatal("no yuebing StatefulSet")
	}
	c := nodes.pod.Spec.Containers[0]
	// The node's name is the pod's: stable across restarts.
	if v, _ := flagValue(c.Args, "node-name"); v != "$(POD_NAME)" {
		t.Errorf("--node-name=%q, want $(POD_NAME)", v)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		t.Error("POD_NAME does not come from metadata.name")
	}
	// The data directory is the claim template's volume.
	dir, _ := flagValue(c.Args, "data-dir")
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == dir && slices.ContainsFunc(nodes.sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == m.Name })
	}) {
		t.Errorf("--data-dir=%q is not a volumeClaimTemplate's mount", dir)
	}
	// Secret files are in mounted Secrets.
	for _, flag := range []string{"cluster-token-file", "auth-tokens-file"} {
		path, ok := flagValue(c.Args, flag)
		if !ok {
			t.Errorf("no --%s", flag)
			continue
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return filepath.Dir(path) == m.MountPath && slices.ContainsFunc(nodes.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && v.Secret != nil })
		}) {
			t.Errorf("--%s=%s is not in a mounted Secret", flag, path)
		}
	}
	// --etcd names members the etcd StatefulSet has.
	etcd, ok := stsByName["etcd"]
	if !ok {
		t.Fatal("no etcd StatefulSet")
	}
	urls, _ := flagValue(c.Args, "etcd")
	for _, u := range strings.Split(urls, ",") {
		var i int32
		if _, err := fmt.Sscanf(u, "http://etcd-%d."+etcd.sts.Spec.ServiceName+":2379", &i); err != nil || i >= etcd.replicas {
			t.Errorf("--etcd URL %s is not a member of StatefulSet etcd (%d replicas)", u, etcd.replicas)
		}
	}
}

func TestSecretsExampleHasEveryKey(t *testing.T) {
	docs := load(t)
	secrets := map[string]*corev1.Secret{}
	for _, d := range docs {
		if s, ok := d.obj.(*corev1.Secret); ok {
			if d.file != "secrets.example.yaml" {
				t.Errorf("%s: Secret %s outside secrets.example.yaml would ship a known secret", d.file, s.Name)
			}
			secrets[s.Name] = s
		}
	}
	has := func(name, key string) bool {
		s := secrets[name]
		if s == nil {
			return false
		}
		_, a := s.StringData[key]
		_, b := s.Data[key]
		return a || b
	}
	for _, w := range workloads(docs) {
		for _, v := range w.pod.Spec.Volumes {
			if v.Secret != nil && secrets[v.Secret.SecretName] == nil {
				t.Errorf("%s: Secret %s is not in secrets.example.yaml", w.name, v.Secret.SecretName)
			}
		}
		for _, c := range w.pod.Spec.Containers {
			for _, e := range c.Env {
				if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !has(r.SecretKeyRef.Name, r.SecretKeyRef.Key) {
					t.Errorf("%s: env %s reads %s/%s, not in secrets.example.yaml", w.name, e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
				}
			}
			for _, flag := range []string{"cluster-token-file", "auth-tokens-file"} {
				path, ok := flagValue(c.Args, flag)
				if !ok {
					continue
				}
				for _, m := range c.VolumeMounts {
					if m.MountPath != filepath.Dir(path) {
						continue
					}
					for _, v := range w.pod.Spec.Volumes {
						if v.Name == m.Name && v.Secret != nil && !has(v.Secret.SecretName, filepath.Base(path)) {
							t.Errorf("%s: --%s=%s: Secret %s has no key %s", w.name, flag, path, v.Secret.SecretName, filepath.Base(path))
						}
					}
				}
			}
		}
	}
}

func TestServiceMonitorScrapesNodesAndRouter(t *testing.T) {
	docs := load(t)
	var sms []*monitoringv1.ServiceMonitor
	var svcs []*corev1.Service
	for _, d := range docs {
		switch o := d.obj.(type) {
		case *monitoringv1.ServiceMonitor:
			sms = append(sms, o)
		case *corev1.Service:
			svcs = append(svcs, o)
		}
	}
	if len(sms) == 0 {
		t.Fatal("no ServiceMonitor")
	}
	scraped := map[string]bool{}
	for _, sm := range sms {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range svcs {
			if !sel.Matches(labels.Set(s.Labels)) {
				continue
			}
			for _, e := range sm.Spec.Endpoints {
				if e.Path != "/metrics" {
					t.Errorf("ServiceMonitor %s: path %q, want /metrics", sm.Name, e.Path)
				}
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
					t.Errorf("ServiceMonitor %s: Service %s has no port %q", sm.Name, s.Name, e.Port)
				}
			}
			scraped[s.Labels["app.kubernetes.io/component"]] = true
		}
	}
	for _, want := range []string{"node", "router"} {
		if !scraped[want] {
			t.Errorf("no ServiceMonitor scrapes the %s Service", want)
		}
	}
}
