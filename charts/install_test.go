package charts_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

// TestChartInstallsUpgradesAndUninstalls installs the chart with the helm
// binary into a real hub API server (without the CRDs: the chart brings
// them), upgrades it to other values and uninstalls it: what stays is the
// CRDs, as Helm leaves crds/ alone.
func TestChartInstallsUpgradesAndUninstalls(t *testing.T) {
	h := startReleaseHub(t, fleet.Options{Scheme: clusters.NewScheme(), HubCRDs: []string{}})
	ctx := context.Background()
	c := h.Hub.Client
	apiext, err := client.New(h.Hub.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(apiext.Scheme()); err != nil {
		t.Fatal(err)
	}
	h.helm(t, "install", "widgethub", chartDir, "--set", "image.tag=v0.1.0")
	for _, name := range []string{"memberclusters.widgethub.io", "widgets.widgethub.io"} {
		if err := apiext.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s after install: %v", name, err)
		}
	}
	key := client.ObjectKey{Namespace: "widgethub-system", Name: "widgethub"}
	ours := []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &appsv1.Deployment{}, &policyv1.PodDisruptionBudget{}}
	for _, obj := range ours {
		if err := c.Get(ctx, key, obj); err != nil {
			t.Errorf("%T %s after install: %v", obj, key, err)
		}
	}
	for _, obj := range []client.Object{&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgethub"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgethub-metrics-reader"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgethub-metrics-auth"}}} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s after install: %v", obj, obj.GetName(), err)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "widgethub-system", Name: "widgethub-metrics"}, &corev1.Service{}); err != nil {
		t.Errorf("metrics Service after install: %v", err)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, key, &d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--sharding") ||
		d.Spec.Template.Spec.Containers[0].Image != "widgethub/widgethub:v0.1.0" {
		t.Errorf("installed Deployment: replicas %d, image %s, args %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Spec.Containers[0].Args)
	}
	// The hub's RBAC gives the manager its namespace's Secrets and nothing elsewhere.
	sa := "system:serviceaccount:widgethub-system:widgethub"
	for _, tc := range []struct {
		ns, verb, resource, group string
		allowed                   bool
	}{
		{"widgethub-system", "watch", "secrets", "", true},
		{"widgethub-system", "update", "leases", "coordination.k8s.io", true},
		{"default", "list", "secrets", "", false},
		{"", "create", "tokenreviews", "authentication.k8s.io", true},
	} {
		allowed := h.allowed(t, sa, authorizationv1.ResourceAttributes{Namespace: tc.ns, Verb: tc.verb, Resource: tc.resource, Group: tc.group})
		if allowed != tc.allowed {
			t.Errorf("%s may %s %s in %q: %v, want %v", sa, tc.verb, tc.resource, tc.ns, allowed, tc.allowed)
		}
	}

	// Upgrade: one leader-elected replica, tuned members, no budget.
	h.helm(t, "upgrade", "widgethub", chartDir, "--reuse-values", "--set", "replicas=1,sharding=false,members.qps=50,podDisruptionBudget.enabled=false")
	if err := c.Get(ctx, key, &d); err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if *d.Spec.Replicas != 1 || slices.Contains(args, "--sharding") || !slices.Contains(args, "--leader-elect=true") ||
		!slices.Contains(args, "--member-qps=50") || d.Spec.Template.Spec.Containers[0].Image != "widgethub/widgethub:v0.1.0" {
		t.Errorf("upgraded Deployment: replicas %d, image %s, args %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, args)
	}
	if err := c.Get(ctx, key, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Errorf("PodDisruptionBudget after an upgrade that disables it: %v", err)
	}
	if out := h.helm(t, "history", "widgethub"); !strings.Contains(out, "deployed") || !strings.Contains(out, "superseded") {
		t.Errorf("helm history after the upgrade:\n%s", out)
	}

	h.helm(t, "uninstall", "widgethub")
	for _, obj := range append(ours, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "widgethub-system", Name: "widgethub-metrics"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgethub"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgethub-metrics-reader"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgethub-metrics-auth"}}) {
		k := client.ObjectKeyFromObject(obj)
		if k.Name == "" {
			k = key
		}
		if err := c.Get(ctx, k, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after uninstall: %v", obj, k, err)
		}
	}
	// Nothing of the release is left in the namespace (Helm's release Secrets included).
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace("widgethub-system")); err != nil || len(secrets.Items) != 0 {
		t.Errorf("Secrets left after uninstall: %d (err %v)", len(secrets.Items), err)
	}
	for _, name := range []string{"memberclusters.widgethub.io", "widgets.widgethub.io"} {
		if err := apiext.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s after uninstall: %v; Helm keeps crds/", name, err)
		}
	}
}
