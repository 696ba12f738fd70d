// Package kubernetes holds sluice's Kubernetes manifests and their check:
// a module of its own, so that sluice's module does not depend on
// Kubernetes's API types. make deploy-check runs it.
package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The manifests are checked offline, against Kubernetes's own API types:
// each document is decoded strictly (sigs.k8s.io/yaml.UnmarshalStrict: an
// unknown or misspelt field, a duplicate key, or a value of the wrong type
// fails) into the type of its apiVersion and kind, as the API server
// decodes it, and then the references between them are checked: what a
// schema checker cannot see. A schema checker such as kubeconform fetches
// its JSON schemas from the network, which make test cannot rely on.

// manifests returns the manifests of the directory by kind, decoded
// strictly, and the files kustomization.yaml must list.
type manifests struct {
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	deployments []appsv1.Deployment
	services    []corev1.Service
	pdbs        []policyv1.PodDisruptionBudget
	files       []string
}

func load(t *testing.T) manifests {
	t.Helper()
	names, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	for _, name := range names {
		if name == "kustomization.yaml" {
			continue
		}
		m.files = append(m.files, name)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			where := fmt.Sprintf("%s, document %d", name, i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var target any
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 ConfigMap":
				m.configMaps = append(m.configMaps, corev1.ConfigMap{})
				target = &m.configMaps[len(m.configMaps)-1]
			case "v1 Secret":
				m.secrets = append(m.secrets, corev1.Secret{})
				target = &m.secrets[len(m.secrets)-1]
			case "apps/v1 Deployment":
				m.deployments = append(m.deployments, appsv1.Deployment{})
				target = &m.deployments[len(m.deployments)-1]
			case "v1 Service":
				m.services = append(m.services, corev1.Service{})
				target = &m.services[len(m.services)-1]
			case "policy/v1 PodDisruptionBudget":
				m.pdbs = append(m.pdbs, policyv1.PodDisruptionBudget{})
				target = &m.pdbs[len(m.pdbs)-1]
			default:
				t.Fatalf("%s: apiVersion %q kind %q: the test does not know it; add its type", where, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, target); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	return m
}

// TestManifests decodes every manifest strictly and checks what sluice
// serve needs of them: the configuration from the ConfigMap, the admin
// token from the Secret, readiness on /readyz and liveness on /healthz,
// a Service and a PodDisruptionBudget that select the pods, and the
// metrics port annotated for Prometheus.
func TestManifests(t *testing.T) {
	m := load(t)
	if len(m.configMaps) != 1 || len(m.secrets) != 1 || len(m.deployments) != 1 || len(m.services) != 1 || len(m.pdbs) != 1 {
		t.Fatalf("%d ConfigMaps, %d Secrets, %d Deployments, %d Services, %d PodDisruptionBudgets; want one of each",
			len(m.configMaps), len(m.secrets), len(m.deployments), len(m.services), len(m.pdbs))
	}
	cm, secret, d, svc, pdb := m.configMaps[0], m.secrets[0], m.deployments[0], m.services[0], m.pdbs[0]

	kust, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(kust, &k); err != nil {
		t.Errorf("kustomization.yaml: %v", err)
	}
	if slices.Sort(k.Resources); !slices.Equal(k.Resources, m.files) {
		t.Errorf("kustomization.yaml lists %q, want every manifest: %q", k.Resources, m.files)
	}

	pod := d.Spec.Template
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Deployment's selector %v (%v) does not select its pods' labels %v", d.Spec.Selector, err, pod.Labels)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v, want at least 2 for the PodDisruptionBudget to let a node drain", d.Spec.Replicas)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want sluice's", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 8080 || ports["grpc"] != 8081 || ports["admin"] != 9464 {
		t.Errorf("container ports %v, want http 8080, grpc 8081, admin 9464 (the image's entrypoint)", ports)
	}

	// The configuration: the ConfigMap's sluice.yaml at /etc/sluice.
	if !strings.Contains(cm.Data["sluice.yaml"], "policies:") {
		t.Errorf("the ConfigMap has no sluice.yaml with policies: %q", cm.Data)
	}
	mounted := false
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
			continue
		}
		for _, vm := range c.VolumeMounts {
			mounted = mounted || (vm.Name == v.Name && vm.MountPath == "/etc/sluice" && vm.ReadOnly)
		}
	}
	if !mounted {
		t.Errorf("the ConfigMap %q is not mounted read-only at /etc/sluice (the image reads /etc/sluice/sluice.yaml)", cm.Name)
	}

	// The admin token from the Secret, and the admin view served where
	// the token is needed.
	tokenFrom := ""
	for _, e := range c.Env {
		if e.Name == "SLUICE_ADMIN_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			tokenFrom = ref.Name + "/" + ref.Key
		}
	}
	if _, ok := secret.StringData["token"]; !ok || tokenFrom != secret.Name+"/token" {
		t.Errorf("SLUICE_ADMIN_TOKEN from %q, want the Secret's token (%s/token)", tokenFrom, secret.Name)
	}
	if !slices.Equal(c.Args, []string{"--admin", "0.0.0.0:9464"}) || len(c.Command) != 0 {
		t.Errorf("command %q args %q; want the image's entrypoint with --admin 0.0.0.0:9464 after it", c.Command, c.Args)
	}

	// Probes.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("the %s probe %+v, want GET %s on the http port", p.name, p.probe, p.path)
		}
	}

	// Prometheus's annotations name the port that serves /metrics.
	a := pod.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" || a["prometheus.io/port"] != fmt.Sprint(ports["http"]) {
		t.Errorf("pod annotations %v, want prometheus.io/scrape true, path /metrics, port %d", a, ports["http"])
	}

	// The Service and the PodDisruptionBudget select the pods.
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the Service's selector %v does not select the pods %v", svc.Spec.Selector, pod.Labels)
	}
	for _, p := range svc.Spec.Ports {
		if _, ok := ports[p.TargetPort.String()]; !ok {
			t.Errorf("the Service's port %s targets %q, which the container does not name", p.Name, p.TargetPort.String())
		}
		if p.Name == "admin" || p.Port == 9464 {
			t.Errorf("the Service exposes the admin view (%s)", p.Name)
		}
	}
	psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || psel.Empty() || !psel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the PodDisruptionBudget's selector %v (%v) does not select the pods %v", pdb.Spec.Selector, err, pod.Labels)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("minAvailable %v with %d replicas: want at least 1 and fewer than the replicas, so that a drain can go on", pdb.Spec.MinAvailable, *d.Spec.Replicas)
	}
}

// TestStrictDecoding: the check fails a manifest with a misspelt field or a
// value of the wrong type, as the API server would refuse it.
func TestStrictDecoding(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: http}]}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n",
	} {
		var v any = &corev1.Service{}
		if strings.Contains(doc, "Deployment") {
			v = &appsv1.Deployment{}
		}
		if err := yaml.UnmarshalStrict([]byte(doc), v); err == nil {
			t.Errorf("UnmarshalStrict accepted %q", doc)
		}
	}
}
