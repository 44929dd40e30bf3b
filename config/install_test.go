package config_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/manifests"
)

// warnings collects the API server's warning headers (PodSecurity's among them).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// render runs hack/render.sh, the overlay make deploy applies.
func render(t *testing.T, image string) []*unstructured.Unstructured {
	t.Helper()
	requireKubectl(t)
	objs, err := manifests.Render("../hack/render.sh", image)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// requireKubectl skips t when kubectl is not on PATH, and fails it instead
// in CI (CI=true), where a skipped check would pass silently.
func requireKubectl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl is not on PATH, and CI=true: this test must run in CI (%v)", err)
		}
		t.Skip("kubectl is not on PATH")
	}
}

func TestHubInstallRendersAndApplies(t *testing.T) {
	const image = "registry.example/widgethub/widgethub:v0.1.0"
	objs := render(t, image)

	kinds := map[string]int{}
	var deploy appsv1.Deployment
	var pdb policyv1.PodDisruptionBudget
	var namespace corev1.Namespace
	var service corev1.Service
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	var clusterRoleBindings []*rbacv1.ClusterRoleBinding
	for _, u := range objs {
		kinds[u.GetKind()]++
		if ns := u.GetNamespace(); ns != "" && ns != "widgethub-system" {
			t.Errorf("%s %s is in namespace %q, want widgethub-system", u.GetKind(), u.GetName(), ns)
		}
		var into any
		switch u.GetKind() {
		case "Deployment":
			into = &deploy
		case "PodDisruptionBudget":
			into = &pdb
		case "Namespace":
			into = &namespace
		case "Service":
			into = &service
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			clusterRoles[u.GetName()], into = r, r
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			clusterRoleBindings, into = append(clusterRoleBindings, b), b
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	// The ClusterRoles: the manager's for TokenReviews and
	// SubjectAccessReviews (its metrics server's authn/authz) and
	// widgethub-metrics-reader for the scrapers; any other needs a reason.
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "Role": 1,
		"RoleBinding": 1, "ClusterRole": 2, "ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("rendered kinds = %v, want %v (a ClusterRole needs a reason)", kinds, want)
	}
	checkManager(t, &deploy, image)
	checkRestricted(t, &namespace, &deploy)
	checkFailover(t, &deploy, &pdb)
	checkMetrics(t, &deploy, &service, clusterRoles, clusterRoleBindings)

	// Apply: the namespace for real (a dry run would not make it), the rest
	// with a server-side dry run, collecting the API server's warnings.
	f, err := fleet.Start(fleet.Options{Scheme: clusters.NewScheme(), HubCRDs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	warned := &warnings{}
	cfg := rest.CopyConfig(f.Hub.Config)
	cfg.WarningHandlerWithContext = warned
	c, err := client.New(cfg, client.Options{Scheme: clusters.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range objs {
		opts := []client.ApplyOption{client.FieldOwner("widgethub-install-test"), client.ForceOwnership}
		if u.GetKind() != "Namespace" {
			opts = append(opts, client.DryRunAll)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
			t.Errorf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	// The namespace enforces the restricted Pod Security level: a Deployment
	// whose pods would break it draws a warning.
	if len(warned.list) > 0 {
		t.Errorf("the API server warned:\n%s", strings.Join(warned.list, "\n"))
	}
	// The dry run wrote nothing.
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, client.InNamespace("widgethub-system")); err != nil || len(deployments.Items) != 0 {
		t.Errorf("after a dry run: %d Deployments, err %v", len(deployments.Items), err)
	}
}

// checkManager checks what the cluster cannot: the manager's probes, requests and hardening.
func checkManager(t *testing.T, d *appsv1.Deployment, image string) {
	t.Helper()
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("manager Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("image = %q, want %q", c.Image, image)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "probes" {
			t.Errorf("probe for %s = %+v", path, probe)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if len(ports) != 2 || ports["probes"] != 8081 || ports["https"] != 8443 {
		t.Errorf("ports = %v, want probes 8081 and https 8443", ports)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests = %v", c.Resources.Requests)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the root filesystem is writable: %+v", sc)
	}
	if d.Spec.Template.Spec.ServiceAccountName != "widgethub" {
		t.Errorf("serviceAccountName = %q", d.Spec.Template.Spec.ServiceAccountName)
	}
}

// checkRestricted checks what docs/install.md promises of the manager's pods
// and namespace: the namespace enforces the restricted Pod Security level,
// and the pods run as the non-root user 65532 (the image's, see the
// Dockerfile), with every capability dropped, no privilege escalation and
// the RuntimeDefault seccomp profile. The dry-run apply below checks the
// Deployment against the level too, but only while the label is there.
func checkRestricted(t *testing.T, ns *corev1.Namespace, d *appsv1.Deployment) {
	t.Helper()
	if ns.Name != "widgethub-system" {
		t.Fatalf("rendered namespace %q, want widgethub-system", ns.Name)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace label pod-security.kubernetes.io/enforce = %q, want restricted", got)
	}
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	c := d.Spec.Template.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	// A container's setting wins over the pod's.
	runAsNonRoot := cmp.Or(sc.RunAsNonRoot, pod.RunAsNonRoot)
	if runAsNonRoot == nil || !*runAsNonRoot {
		t.Errorf("runAsNonRoot is not set: pod %+v, container %+v", pod, sc)
	}
	if user := cmp.Or(sc.RunAsUser, pod.RunAsUser); user == nil || *user != 65532 {
		t.Errorf("runAsUser = %v, want 65532", ptr.Deref(user, -1))
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("allowPrivilegeEscalation is not false: %+v", sc)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	seccomp := cmp.Or(sc.SeccompProfile, pod.SeccompProfile)
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", seccomp)
	}
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^USER 65532(:65532)?\s*$`).Match(dockerfile) {
		t.Errorf("the Dockerfile does not run the image as user 65532:\n%s", dockerfile)
	}
}

// checkFailover checks that the members always have replicas to serve them:
// three replicas that share the members (sharding), and a disruption budget
// that evicts one at a time.
func checkFailover(t *testing.T, d *appsv1.Deployment, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("manager replicas = %d, want 3", ptr.Deref(d.Spec.Replicas, 0))
	}
	// The arguments turn sharding on, each replica named after its Pod.
	opts := managerOptions(t, d)
	c := d.Spec.Template.Spec.Containers[0]
	if !opts.Sharding {
		t.Errorf("manager arguments %q leave sharding off", c.Args)
	}
	if opts.ReplicaID != "" {
		t.Errorf("manager arguments %q set one --replica-id for every replica; the default (the Pod's name) tells them apart", c.Args)
	}
	if opts.RegistrationNamespace != "widgethub-system" {
		t.Errorf("registration namespace (and the Lease's) = %q, want widgethub-system", opts.RegistrationNamespace)
	}

	if pdb.Name == "" {
		t.Fatal("no PodDisruptionBudget rendered")
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget minAvailable = %v, maxUnavailable = %v; want maxUnavailable 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || selector.Empty() || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v (err %v) does not select the manager's pods %v", pdb.Spec.Selector, err, d.Spec.Template.Labels)
	}
}

// managerOptions parses the manager's arguments as the binary does
// (cmd/widgethub), with no --replica-id by default.
func managerOptions(t *testing.T, d *appsv1.Deployment) app.Options {
	t.Helper()
	opts := app.DefaultOptions()
	opts.ReplicaID = ""
	fs := flag.NewFlagSet("widgethub", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.String("kubeconfig", "", "")
	c := d.Spec.Template.Spec.Containers[0]
	if err := fs.Parse(append(slices.Clone(c.Command), c.Args...)); err != nil {
		t.Errorf("manager arguments %q: %v", c.Args, err)
	}
	return opts
}

// checkMetrics checks the metrics as kubebuilder v4 serves them: HTTPS with
// authentication and authorization on :8443, behind the Service port named
// https (the one a ServiceMonitor names), the manager allowed to create the
// TokenReviews and SubjectAccessReviews that takes, and a
// widgethub-metrics-reader ClusterRole for the scrapers. The metrics server
// refusing and serving with these very roles is
// TestMetricsServedOnlyToTheMetricsReader (cmd/widgethub/app).
func checkMetrics(t *testing.T, d *appsv1.Deployment, svc *corev1.Service, roles map[string]*rbacv1.ClusterRole, bindings []*rbacv1.ClusterRoleBinding) {
	t.Helper()
	opts := managerOptions(t, d)
	if !opts.MetricsSecure || opts.MetricsBindAddress != ":8443" {
		t.Errorf("manager serves metrics on %q, secure %v; want :8443, secure", opts.MetricsBindAddress, opts.MetricsSecure)
	}
	if svc.Name != "widgethub-metrics" || len(svc.Spec.Ports) != 1 {
		t.Fatalf("metrics Service %q with ports %+v, want widgethub-metrics with one port", svc.Name, svc.Spec.Ports)
	}
	p := svc.Spec.Ports[0]
	if p.Name != "https" || p.Port != 8443 || p.TargetPort.String() != "https" {
		t.Errorf("metrics Service port = %+v, want https 8443 to the container port https", p)
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	if selector.Empty() || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("metrics Service selector %v does not select the manager's pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}

	reader := roles["widgethub-metrics-reader"]
	wantReader := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if reader == nil || fmt.Sprint(reader.Rules) != fmt.Sprint(wantReader) {
		t.Errorf("ClusterRole widgethub-metrics-reader = %+v, want rules %+v", reader, wantReader)
	}
	// The manager's ClusterRole, bound to its ServiceAccount, grants the
	// reviews and nothing else.
	var bound []string
	for _, b := range bindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == d.Spec.Template.Spec.ServiceAccountName && s.Namespace == d.Namespace && b.RoleRef.Kind == "ClusterRole" {
				bound = append(bound, b.RoleRef.Name)
			}
		}
	}
	if len(bound) != 1 || roles[bound[0]] == nil {
		t.Fatalf("the manager's ServiceAccount is bound to the ClusterRoles %q, want one that is rendered", bound)
	}
	wantAuth := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if got := roles[bound[0]].Rules; fmt.Sprint(got) != fmt.Sprint(wantAuth) {
		t.Errorf("ClusterRole %s of the manager = %+v, want %+v", bound[0], got, wantAuth)
	}
}
