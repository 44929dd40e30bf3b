package config_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
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
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not on PATH")
	}
	var stderr bytes.Buffer
	cmd := exec.Command("../hack/render.sh", image)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/render.sh: %v\n%s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decode rendered manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func TestHubInstallRendersAndApplies(t *testing.T) {
	const image = "registry.example/widgethub/widgethub:v0.1.0"
	objs := render(t, image)

	kinds := map[string]int{}
	var deploy appsv1.Deployment
	var pdb policyv1.PodDisruptionBudget
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
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "Role": 1,
		"RoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("rendered kinds = %v, want %v (a ClusterRole needs a reason)", kinds, want)
	}
	checkManager(t, &deploy, image)
	checkFailover(t, &deploy, &pdb)

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
	if ports["probes"] != 8081 || ports["metrics"] != 8080 {
		t.Errorf("ports = %v, want probes 8081 and metrics 8080", ports)
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

// checkFailover checks that a standby manager is always there to take over:
// two replicas that elect a leader, and a disruption budget that evicts one at
// a time.
func checkFailover(t *testing.T, d *appsv1.Deployment, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("manager replicas = %d, want 2", ptr.Deref(d.Spec.Replicas, 0))
	}
	// The arguments parse as the binary parses them (cmd/widgethub), and leave
	// leader election on.
	opts := app.DefaultOptions()
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
	if !opts.LeaderElection {
		t.Errorf("manager arguments %q turn leader election off", c.Args)
	}
	if opts.RegistrationNamespace != "widgethub-system" {
		t.Errorf("registration namespace (and the Lease's) = %q, want widgethub-system", opts.RegistrationNamespace)
	}

	if pdb.Name == "" {
		t.Fatal("no PodDisruptionBudget rendered")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "1" || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget minAvailable = %v, maxUnavailable = %v; want minAvailable 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || selector.Empty() || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v (err %v) does not select the manager's pods %v", pdb.Spec.Selector, err, d.Spec.Template.Labels)
	}
}
