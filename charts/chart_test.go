package charts_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// typed are the kinds the chart may render, as Go types: converting into
// them with unknown fields refused catches a misspelt field.
var typed = map[string]func() any{
	"CustomResourceDefinition": func() any { return &apiextensionsv1.CustomResourceDefinition{} },
	"ServiceAccount":           func() any { return &corev1.ServiceAccount{} },
	"ConfigMap":                func() any { return &corev1.ConfigMap{} },
	"Role":                     func() any { return &rbacv1.Role{} },
	"ClusterRole":              func() any { return &rbacv1.ClusterRole{} },
	"ClusterRoleBinding":       func() any { return &rbacv1.ClusterRoleBinding{} },
	"RoleBinding":              func() any { return &rbacv1.RoleBinding{} },
	"Deployment":               func() any { return &appsv1.Deployment{} },
	"Service":                  func() any { return &corev1.Service{} },
	"PodDisruptionBudget":      func() any { return &policyv1.PodDisruptionBudget{} },
	"NetworkPolicy":            func() any { return &networkingv1.NetworkPolicy{} },
}

// objects indexes rendered objects by "Kind namespace/name".
type objects map[string]*unstructured.Unstructured

func index(objs []*unstructured.Unstructured) objects {
	out := objects{}
	for _, u := range objs {
		out[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u
	}
	return out
}

func (o objects) keys() []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// into converts the object named key into a typed object, refusing unknown fields.
func into[T any](t *testing.T, o objects, key string) *T {
	t.Helper()
	u, ok := o[key]
	if !ok {
		t.Fatalf("no %s rendered; rendered: %v", key, o.keys())
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return out
}

// checkTyped checks that every rendered object is of a known kind and has no unknown field.
func checkTyped(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "ServiceMonitor" {
			continue // no Go type here; TestChartWithEveryValue reads it
		}
		newObj, ok := typed[u.GetKind()]
		if !ok {
			t.Errorf("rendered an unexpected kind %s (%s)", u.GetKind(), u.GetName())
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, newObj(), true); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func TestChartLintsAndRendersWithDefaults(t *testing.T) {
	out := mustHelm(t, "lint", "--strict", chartDir)
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint:\n%s", out)
	}
	checkTyped(t, template(t))
}

// TestChartWithEveryValue lints and renders the chart with every value of
// values.yaml set (ci/all-values.yaml), and checks each value's effect.
func TestChartWithEveryValue(t *testing.T) {
	const all = chartDir + "/ci/all-values.yaml"
	checkEveryValueSet(t, chartDir+"/values.yaml", all)
	out := mustHelm(t, "lint", "--strict", chartDir, "--namespace", "platform", "--values", all)
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint:\n%s", out)
	}
	rendered := decode(t, mustHelm(t, "template", "x", chartDir, "--namespace", "platform", "--values", all))
	checkTyped(t, rendered)
	o := index(rendered)
	want := []string{
		"ConfigMap platform/platform-hub-clusterprofiles", "Deployment platform/platform-hub", "NetworkPolicy platform/platform-hub",
		"Role fleet-inventory/platform-hub-clusterprofiles", "Role fleet-registrations/platform-hub",
		"RoleBinding fleet-inventory/platform-hub-clusterprofiles", "RoleBinding fleet-registrations/platform-hub",
		"Service platform/platform-hub-metrics", "ServiceMonitor platform/platform-hub-metrics",
	}
	if got := o.keys(); !slices.Equal(got, want) {
		t.Errorf("rendered %v, want %v (no ServiceAccount: serviceAccount.create is false; no PodDisruptionBudget; no ClusterRoles: metrics.secure is false)", got, want)
	}

	d := into[appsv1.Deployment](t, o, "Deployment platform/platform-hub")
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	wantArgs := []string{
		"--leader-elect=false", "--registration-namespace=fleet-registrations",
		"--metrics-bind-address=:9090", "--health-probe-bind-address=:9091", "--metrics-secure=false",
		"--member-qps=150", "--member-burst=300", "--member-sync-timeout=45s", "--member-request-timeout=20s", "--member-max-objects=20000",
		"--probe-interval=10s", "--probe-timeout=4s", "--probe-failure-threshold=5",
		"--allow-credential-plugins", "--allow-insecure-members", "--allow-link-local-members",
		"--max-concurrent-reconciles=64", "--max-concurrent-reconciles-per-member=16",
		"--clusterprofile-provider-file=/etc/widgethub/clusterprofiles/providers.json", "--clusterprofile-namespace=fleet-inventory",
		"--zap-log-level=debug",
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %q\nwant   %q", c.Args, wantArgs)
	}
	for what, ok := range map[string]bool{
		"image digest":       c.Image == "registry.example/platform/widgethub@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"pull policy":        c.ImagePullPolicy == corev1.PullAlways,
		"pull secret":        len(pod.ImagePullSecrets) == 1 && pod.ImagePullSecrets[0].Name == "regcred",
		"replicas":           *d.Spec.Replicas == 1,
		"service account":    pod.ServiceAccountName == "platform-widgethub",
		"ports":              len(c.Ports) == 2 && c.Ports[0].ContainerPort == 9090 && c.Ports[0].Name == "http" && c.Ports[1].ContainerPort == 9091,
		"cpu limit":          c.Resources.Limits.Cpu().String() == "1",
		"pod security":       pod.SecurityContext != nil && *pod.SecurityContext.RunAsUser == 10001 && *pod.SecurityContext.FSGroup == 10001,
		"container security": c.SecurityContext != nil && c.SecurityContext.Privileged != nil && !*c.SecurityContext.Privileged,
		"grace period":       *pod.TerminationGracePeriodSeconds == 60,
		"node selector":      pod.NodeSelector["kubernetes.io/os"] == "linux",
		"tolerations":        len(pod.Tolerations) == 1 && pod.Tolerations[0].Key == "dedicated",
		"affinity":           pod.Affinity != nil && pod.Affinity.NodeAffinity != nil && pod.Affinity.PodAntiAffinity == nil,
		"priority class":     pod.PriorityClassName == "system-cluster-critical",
		"pod annotations":    d.Spec.Template.Annotations["example.com/team"] == "platform" && d.Spec.Template.Annotations["checksum/clusterprofiles"] != "",
		"init containers":    len(pod.InitContainers) == 1 && pod.InitContainers[0].Name == "credential-plugin" && pod.InitContainers[0].VolumeMounts[0].Name == "plugins",
		"volumes":            slices.Equal(volumeNames(pod.Volumes), []string{"clusterprofile-providers", "plugins", "tokens"}),
		"volume mounts":      slices.Equal(mountPaths(c.VolumeMounts), []string{"/etc/widgethub/clusterprofiles", "/plugins", "/etc/widgethub/tokens"}),
		"pod labels":         d.Spec.Template.Labels["example.com/tier"] == "control",
		"name override":      d.Spec.Template.Labels["app.kubernetes.io/name"] == "hub",
		"selector":           labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)),
	} {
		if !ok {
			t.Errorf("%s not as all-values.yaml sets it: %+v", what, d.Spec.Template)
		}
	}

	svc := into[corev1.Service](t, o, "Service platform/platform-hub-metrics")
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].Port != 9090 || svc.Annotations["example.com/scrape"] != "true" {
		t.Errorf("metrics Service = %+v", svc)
	}
	rb := into[rbacv1.RoleBinding](t, o, "RoleBinding fleet-registrations/platform-hub")
	if rb.Subjects[0].Name != "platform-widgethub" || rb.Subjects[0].Namespace != "platform" {
		t.Errorf("RoleBinding subjects = %+v, want the ServiceAccount platform/platform-widgethub", rb.Subjects)
	}
	np := into[networkingv1.NetworkPolicy](t, o, "NetworkPolicy platform/platform-hub")
	if len(np.Spec.Ingress) != 2 || len(np.Spec.Ingress[1].From) != 1 || np.Spec.Ingress[1].From[0].NamespaceSelector == nil ||
		np.Spec.Ingress[1].Ports[0].Port.String() != "http" || len(np.Spec.Ingress[0].From) != 0 {
		t.Errorf("NetworkPolicy ingress = %+v, want probes from anywhere and metrics from the monitoring namespace", np.Spec.Ingress)
	}
	if !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy selects %v, not the manager's pods", np.Spec.PodSelector)
	}
	sm := o["ServiceMonitor platform/platform-hub-metrics"]
	endpoint, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	smSelector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if fmt.Sprint(endpoint) != "[map[interval:15s path:/metrics port:http scrapeTimeout:10s]]" ||
		sm.GetLabels()["release"] != "prometheus" || !labels.SelectorFromSet(smSelector).Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor = %v", sm.Object)
	}

	// With secure metrics (the default) the ServiceMonitor scrapes over
	// HTTPS with its token, and the manager may review tokens and access.
	o = index(decode(t, mustHelm(t, "template", "widgethub", chartDir, "--namespace", "widgethub-system", "--set", "metrics.serviceMonitor.enabled=true")))
	sm = o["ServiceMonitor widgethub-system/widgethub-metrics"]
	if sm == nil {
		t.Fatalf("metrics.serviceMonitor.enabled=true renders no ServiceMonitor: %v", o.keys())
	}
	endpoint, _, _ = unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if fmt.Sprint(endpoint) != "[map[bearerTokenFile:/var/run/secrets/kubernetes.io/serviceaccount/token interval:30s path:/metrics port:https scheme:https tlsConfig:map[insecureSkipVerify:true]]]" {
		t.Errorf("secure ServiceMonitor endpoints = %v", endpoint)
	}
	for _, key := range []string{"ClusterRole /widgethub", "ClusterRoleBinding /widgethub-metrics-auth", "ClusterRole /widgethub-metrics-reader"} {
		if o[key] == nil {
			t.Errorf("secure metrics render no %s", key)
		}
	}

	// metrics.certSecret: the Secret mounted and passed as --metrics-cert-path.
	o = index(decode(t, mustHelm(t, "template", "widgethub", chartDir, "--set", "metrics.certSecret=widgethub-metrics-tls")))
	d = into[appsv1.Deployment](t, o, "Deployment default/widgethub")
	pod = d.Spec.Template.Spec
	if !slices.Contains(pod.Containers[0].Args, "--metrics-cert-path=/etc/widgethub/metrics-certs") ||
		len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "widgethub-metrics-tls" ||
		len(pod.Containers[0].VolumeMounts) != 1 || pod.Containers[0].VolumeMounts[0].MountPath != "/etc/widgethub/metrics-certs" {
		t.Errorf("metrics.certSecret: args %q, volumes %+v, mounts %+v", pod.Containers[0].Args, pod.Volumes, pod.Containers[0].VolumeMounts)
	}

	// metrics.service.enabled=false: no Service, so no ServiceMonitor either.
	o = index(decode(t, mustHelm(t, "template", "x", chartDir, "--values", all, "--set", "metrics.service.enabled=false")))
	if o["Service default/platform-hub-metrics"] != nil || o["ServiceMonitor default/platform-hub-metrics"] != nil {
		t.Errorf("metrics.service.enabled=false renders %v", o.keys())
	}

	// Turned off: the metrics port leaves no Service, ServiceMonitor or NetworkPolicy rule.
	o = index(decode(t, mustHelm(t, "template", "x", chartDir, "--values", all, "--set", "metrics.port=0")))
	if _, ok := o["Service default/platform-hub-metrics"]; ok {
		t.Error("metrics.port=0 still renders the metrics Service")
	}
	d = into[appsv1.Deployment](t, o, "Deployment default/platform-hub")
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--metrics-bind-address=0") {
		t.Errorf("metrics.port=0: args %q", d.Spec.Template.Spec.Containers[0].Args)
	}
}

// opaqueValues are values passed through to the manifests whole (Kubernetes
// types): all-values must change them, not each of their fields.
var opaqueValues = []string{"resources", "podSecurityContext", "securityContext", "affinity", "metrics.serviceMonitor.tlsConfig"}

// keptValues are left at their default in all-values, each for a reason, and
// set otherwise in TestChartWithEveryValue.
var keptValues = map[string]string{
	"metrics.service.enabled": "false would hide the Service and the ServiceMonitor; rendered on its own",
	"metrics.certSecret":      "needs metrics.secure, which all-values turns off; rendered on its own",
}

// checkEveryValueSet checks that all-values sets every leaf of values to
// something else, so that rendering with it exercises each documented value.
func checkEveryValueSet(t *testing.T, valuesFile, allFile string) {
	t.Helper()
	read := func(name string) map[string]any {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	var walk func(path string, def, all map[string]any)
	walk = func(path string, def, all map[string]any) {
		for k, dv := range def {
			p := strings.TrimPrefix(path+"."+k, ".")
			if _, ok := keptValues[p]; ok {
				continue
			}
			av, ok := all[k]
			if !ok {
				t.Errorf("%s does not set %s", allFile, p)
				continue
			}
			if dm, ok := dv.(map[string]any); ok && len(dm) > 0 && !slices.Contains(opaqueValues, p) {
				am, ok := av.(map[string]any)
				if !ok {
					t.Errorf("%s: %s is not a map", allFile, p)
					continue
				}
				walk(p, dm, am)
				continue
			}
			if reflect.DeepEqual(dv, av) {
				t.Errorf("%s sets %s to its default %v", allFile, p, dv)
			}
		}
	}
	walk("", read(valuesFile), read(allFile))
}

// TestValuesSchemaRefusesWrongValues: helm refuses values of the wrong type
// or shape before rendering anything.
func TestValuesSchemaRefusesWrongValues(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "replicas=three"}, "/replicas"},
		{[]string{"--set-string", "sharding=yes"}, "/sharding"},
		{[]string{"--set", "members.qps=-1"}, "/members/qps"},
		{[]string{"--set", "members.burst=many"}, "/members/burst"},
		{[]string{"--set", "members.syncTimeout=30 seconds"}, "/members/syncTimeout"},
		{[]string{"--set", "metrics.port=70000"}, "/metrics/port"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{[]string{"--set", "extraArgs[0]=zap-log-level=debug"}, "/extraArgs/0"},
		{[]string{"--set", "registrationNamespace=Not_A_Namespace"}, "/registrationNamespace"},
		{[]string{"--set", "memberQPS=50"}, "memberQPS"}, // a misspelt key is refused, not ignored
		{[]string{"--set", "clusterProfiles.providers=providers.json"}, "/clusterProfiles/providers"},
		{[]string{"--set-json", `clusterProfiles.providers={"providers":[{"name":"p","execConfig":{"args":["x"]}}]}`}, "/clusterProfiles/providers/providers/0/execConfig"},
		{[]string{"--set-json", `clusterProfiles.providers={"providers":[{"name":"p","execConfig":{"command":"c"},"profileSourcedEnvVarsPolicy":"AllowAll"}]}`},
			"/clusterProfiles/providers/providers/0/profileSourcedEnvVarsPolicy"},
		{[]string{"--set-json", `clusterProfiles.providers={"providers":[{"name":"p","exec":{"command":"c"}}]}`}, "/clusterProfiles/providers/providers/0"},
		{[]string{"--set", "clusterProfiles.namespace=Fleet_Inventory"}, "/clusterProfiles/namespace"},
		{[]string{"--set", "extraVolumeMounts[0].name=plugins"}, "/extraVolumeMounts/0"},
	} {
		_, stderr, err := helm(t, append([]string{"template", "x", chartDir}, tc.set...)...)
		if err == nil || !strings.Contains(stderr, "values don't meet the specifications of the schema") || !strings.Contains(stderr, tc.want) {
			t.Errorf("helm template %s: err %v, want the schema to refuse %s; stderr:\n%s", strings.Join(tc.set, " "), err, tc.want, stderr)
		}
	}
	// And the same values of the right type pass.
	mustHelm(t, "template", "x", chartDir, "--set", "replicas=2,sharding=false,members.qps=50,members.burst=100,members.syncTimeout=1m30s,metrics.port=9443")
}

// TestChartMatchesConfigDefault renders the chart with its defaults and
// config/default with kustomize, and checks that they install the same
// hub: the same objects (but the Namespace: a Helm release lives in a
// namespace made before it, see docs/install.md), RBAC rules, container
// arguments and pod spec.
func TestChartMatchesConfigDefault(t *testing.T) {
	const image = "widgethub/widgethub:v0.1.0"
	chart := index(template(t, "--set", "image.tag=v0.1.0"))
	kust := index(kustomize(t, image))
	delete(kust, "Namespace /widgethub-system")
	if got, want := chart.keys(), kust.keys(); !slices.Equal(got, want) {
		t.Fatalf("the chart renders\n  %v\nconfig/default\n  %v", got, want)
	}
	for key, k := range kust {
		c := chart[key]
		// config/default's labels are on the chart's objects too, but on
		// the CRDs: Helm installs crds/ as they are, config/crd/bases' copies.
		for l, v := range k.GetLabels() {
			if k.GetKind() == "CustomResourceDefinition" {
				break
			}
			if c.GetLabels()[l] != v {
				t.Errorf("%s: label %s=%q in config/default, %q in the chart", key, l, v, c.GetLabels()[l])
			}
		}
		switch k.GetKind() {
		case "CustomResourceDefinition":
			if !reflect.DeepEqual(c.Object["spec"], k.Object["spec"]) {
				t.Errorf("%s: the chart's spec differs from config/crd/bases (run make manifests)", key)
			}
		case "Role", "ClusterRole":
			cr, kr := into[rbacv1.ClusterRole](t, chart, key), into[rbacv1.ClusterRole](t, kust, key)
			if !reflect.DeepEqual(cr.Rules, kr.Rules) {
				t.Errorf("%s rules:\nchart          %+v\nconfig/default %+v", key, cr.Rules, kr.Rules)
			}
		case "RoleBinding", "ClusterRoleBinding":
			cb, kb := into[rbacv1.ClusterRoleBinding](t, chart, key), into[rbacv1.ClusterRoleBinding](t, kust, key)
			if !reflect.DeepEqual(cb.RoleRef, kb.RoleRef) || !reflect.DeepEqual(cb.Subjects, kb.Subjects) {
				t.Errorf("%s: chart %+v %+v, config/default %+v %+v", key, cb.RoleRef, cb.Subjects, kb.RoleRef, kb.Subjects)
			}
		case "Deployment":
			compareDeployments(t, into[appsv1.Deployment](t, chart, key), into[appsv1.Deployment](t, kust, key))
		case "Service":
			cs, ks := into[corev1.Service](t, chart, key), into[corev1.Service](t, kust, key)
			if !reflect.DeepEqual(cs.Spec.Ports, ks.Spec.Ports) || cs.Spec.Type != cmpOr(ks.Spec.Type, corev1.ServiceTypeClusterIP) {
				t.Errorf("%s: chart %+v, config/default %+v", key, cs.Spec, ks.Spec)
			}
			d := into[appsv1.Deployment](t, chart, "Deployment widgethub-system/widgethub")
			if !labels.SelectorFromSet(cs.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("%s selects %v, not the manager's pods", key, cs.Spec.Selector)
			}
		case "PodDisruptionBudget":
			cp, kp := into[policyv1.PodDisruptionBudget](t, chart, key), into[policyv1.PodDisruptionBudget](t, kust, key)
			if !reflect.DeepEqual(cp.Spec.MaxUnavailable, kp.Spec.MaxUnavailable) || !reflect.DeepEqual(cp.Spec.MinAvailable, kp.Spec.MinAvailable) {
				t.Errorf("%s: chart %+v, config/default %+v", key, cp.Spec, kp.Spec)
			}
		case "ServiceAccount":
		default:
			t.Errorf("%s: a kind this test does not compare yet", key)
		}
	}
}

// TestServiceMonitorMatchesConfigPrometheus: the chart's ServiceMonitor
// scrapes as config/prometheus/monitor.yaml does, under the same name.
func TestServiceMonitorMatchesConfigPrometheus(t *testing.T) {
	data, err := os.ReadFile("../config/prometheus/monitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kust := index(decode(t, string(data)))
	chart := index(template(t, "--set", "metrics.serviceMonitor.enabled=true"))
	const key = "ServiceMonitor widgethub-system/widgethub-metrics"
	k, c := kust[key], chart[key]
	if k == nil || c == nil {
		t.Fatalf("config/prometheus has %v, the chart %v; want %s in both", kust.keys(), chart.keys(), key)
	}
	ke, _, _ := unstructured.NestedSlice(k.Object, "spec", "endpoints")
	ce, _, _ := unstructured.NestedSlice(c.Object, "spec", "endpoints")
	// The chart names the scrape interval; config/prometheus leaves Prometheus's.
	delete(ce[0].(map[string]any), "interval")
	if !reflect.DeepEqual(ke, ce) {
		t.Errorf("endpoints:\nchart             %v\nconfig/prometheus %v", ce, ke)
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// compareDeployments compares the manager Deployments but for their labels
// and selectors (the chart adds the release's), which must each select
// their own pods.
func compareDeployments(t *testing.T, chart, kust *appsv1.Deployment) {
	t.Helper()
	if !reflect.DeepEqual(chart.Spec.Replicas, kust.Spec.Replicas) {
		t.Errorf("replicas: chart %d, config/default %d", *chart.Spec.Replicas, *kust.Spec.Replicas)
	}
	cc, kc := chart.Spec.Template.Spec.Containers, kust.Spec.Template.Spec.Containers
	if len(cc) != 1 || len(kc) != 1 {
		t.Fatalf("containers: chart %d, config/default %d", len(cc), len(kc))
	}
	if !slices.Equal(cc[0].Args, kc[0].Args) {
		t.Errorf("container args:\nchart          %q\nconfig/default %q", cc[0].Args, kc[0].Args)
	}
	strip := func(d *appsv1.Deployment) corev1.PodSpec {
		spec := *d.Spec.Template.Spec.DeepCopy()
		if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
			for i, term := range spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				sel, err := metav1.LabelSelectorAsSelector(term.PodAffinityTerm.LabelSelector)
				if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("%s anti-affinity term %d does not select its own pods", d.Name, i)
				}
				spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm.LabelSelector = nil
			}
		}
		// The chart names the image pull policy; kustomize leaves the API
		// server's default, which for a tagged image is the same.
		spec.Containers[0].ImagePullPolicy = ""
		return spec
	}
	if c, k := strip(chart), strip(kust); !reflect.DeepEqual(c, k) {
		cy, _ := yaml.Marshal(c)
		ky, _ := yaml.Marshal(k)
		t.Errorf("pod spec differs:\nchart:\n%s\nconfig/default:\n%s", cy, ky)
	}
	if chart.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image pull policy %q", chart.Spec.Template.Spec.Containers[0].ImagePullPolicy)
	}
	sel, err := metav1.LabelSelectorAsSelector(chart.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(chart.Spec.Template.Labels)) {
		t.Errorf("the chart's Deployment selector %v does not select its pods", chart.Spec.Selector)
	}
}

// volumeNames are the names of volumes, in order.
func volumeNames(volumes []corev1.Volume) []string {
	names := make([]string, 0, len(volumes))
	for _, v := range volumes {
		names = append(names, v.Name)
	}
	return names
}

// mountPaths are the paths of mounts, in order.
func mountPaths(mounts []corev1.VolumeMount) []string {
	paths := make([]string, 0, len(mounts))
	for _, m := range mounts {
		paths = append(paths, m.MountPath)
	}
	return paths
}
