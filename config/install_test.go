package config_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/clusters"
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
	for _, u := range objs {
		kinds[u.GetKind()]++
		if ns := u.GetNamespace(); ns != "" && ns != "widgethub-system" {
			t.Errorf("%s %s is in namespace %q, want widgethub-system", u.GetKind(), u.GetName(), ns)
		}
		if u.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &deploy); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "Role": 1,
		"RoleBinding": 1, "Deployment": 1, "Service": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("rendered kinds = %v, want %v (a ClusterRole needs a reason)", kinds, want)
	}
	checkManager(t, &deploy, image)

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
