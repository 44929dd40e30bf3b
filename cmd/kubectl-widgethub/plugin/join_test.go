package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/reconcilers/widget"
)

// The discovery rule join adds to the generated member role.
var discoveryRule = rbacv1.PolicyRule{
	NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/version", "/readyz"},
	Verbs:           []string{"get"},
}

// generatedMemberRules reads config/member-rbac/role.yaml from disk.
func generatedMemberRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "member-rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			t.Fatalf("no ClusterRole in role.yaml: %v", err)
		}
		if role.Kind == "ClusterRole" {
			return role.Rules
		}
	}
}

// registrationSecret returns the hub's registration Secret of name.
func registrationSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := testFleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: hubNS, Name: name}, s); err != nil {
		t.Fatalf("registration Secret %s: %v", name, err)
	}
	return s
}

// registrationClient is a client of the member with the identity join minted.
func registrationClient(t *testing.T, name string) (client.Client, string) {
	t.Helper()
	return kubeconfigClient(t, registrationSecret(t, name).Data[registration.SecretKey])
}

// registrationClientIn is registrationClient for a registration in namespace of the hub.
func registrationClientIn(t *testing.T, namespace, name string) client.Client {
	t.Helper()
	s := &corev1.Secret{}
	if err := testFleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		t.Fatalf("registration Secret %s/%s: %v", namespace, name, err)
	}
	c, _ := kubeconfigClient(t, s.Data[registration.SecretKey])
	return c
}

// kubeconfigClient is a client for a registration kubeconfig, and its token.
func kubeconfigClient(t *testing.T, doc []byte) (client.Client, string) {
	t.Helper()
	cfg, err := connect.RESTConfig(doc, connect.ConfigOptions{})
	if err != nil {
		t.Fatalf("registration kubeconfig: %v", err)
	}
	c, err := client.New(cfg.REST, client.Options{Scheme: clusters.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg.REST.BearerToken
}

// unjoinCleanup unjoins name with --cleanup, whatever state a test left.
func unjoinCleanup(t *testing.T, name, member string) {
	t.Helper()
	t.Cleanup(func() {
		if r := run(t, "unjoin", name, "--cleanup", "--member-context", member); r.code != 0 {
			t.Errorf("cleanup: %s", r)
		}
		waitNamespaceGone(t, testFleet.Member(member), plugin.MemberNamespace)
	})
}

func TestJoinCreatesLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	alpha := testFleet.Member("alpha")
	unjoinCleanup(t, "alpha", "alpha")
	r := join(t, "alpha", "alpha")

	// The hub holds a labelled registration whose kubeconfig reaches alpha.
	secret := registrationSecret(t, "alpha")
	if secret.Labels[registration.SecretLabel] != "true" {
		t.Errorf("registration labels = %v, want %s=true", secret.Labels, registration.SecretLabel)
	}
	raw, err := clientcmd.Load(secret.Data[registration.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster].Server, alpha.Config.Host; !strings.HasPrefix(want, got) {
		t.Errorf("registration server = %q, want alpha's %q", got, want)
	}
	c, token := registrationClient(t, "alpha")
	if token == "" {
		t.Fatal("the registration kubeconfig has no token")
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Error("join printed the token")
	}

	// The member serves Widgets.
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := alpha.Client.Get(ctx, client.ObjectKey{Name: plugin.WidgetCRDName}, crd); err != nil {
		t.Fatalf("Widget CRD in alpha: %v", err)
	}

	// Exactly one ClusterRole, bound once, to the ServiceAccount, with the generated rules and discovery.
	role := &rbacv1.ClusterRole{}
	if err := alpha.Client.Get(ctx, client.ObjectKey{Name: plugin.MemberClusterRole}, role); err != nil {
		t.Fatal(err)
	}
	if want := append(generatedMemberRules(t), discoveryRule); !equalRules(role.Rules, want) {
		t.Errorf("ClusterRole rules:\n got %+v\nwant %+v", role.Rules, want)
	}
	sa := subjectOfHub()
	// And the Role that lets it renew its token (renew_test.go), bound once.
	wantBindings := []string{"ClusterRoleBinding/" + plugin.MemberClusterRole + "->" + plugin.MemberClusterRole,
		"RoleBinding/" + plugin.MemberNamespace + "/" + plugin.MemberClusterRole + "->" + plugin.MemberClusterRole}
	if got := bindingsOf(t, alpha, sa); !slices.Equal(got, wantBindings) {
		t.Errorf("bindings of the ServiceAccount = %v, want only %v", got, wantBindings)
	}

	checkAccessReviews(t, c)
	checkOperatorRequests(t, alpha, c)
	checkPolicy(t, alpha, c)
}

// checkAccessReviews asks the member, as c, what it may do: what the operator
// needs is allowed; the rest is not.
func checkAccessReviews(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		allow bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "widgethub.io", Resource: "widgets"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: "widgethub.io", Resource: "widgets"}, true},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "widgethub.io", Resource: "widgets", Subresource: "status", Namespace: "shop"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "widgethub.io", Resource: "widgets", Subresource: "status", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Group: "widgethub.io", Resource: "widgets", Subresource: "status", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "widgethub.io", Resource: "widgets", Subresource: "finalizers", Namespace: "shop"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "shop"}, true},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: "shop"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "apps", Resource: "deployments", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: "apps", Resource: "deployments"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: "shop"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "widgethub.io", Resource: "widgets", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "widgethub.io", Resource: "widgets", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "widgethub.io", Resource: "widgets", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "shop"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "namespaces"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: plugin.MemberNamespace}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: plugin.MemberNamespace, Name: plugin.MemberServiceAccount}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: plugin.MemberNamespace, Name: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: "kube-system", Name: plugin.MemberServiceAccount}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: plugin.MemberNamespace}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
	} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tc.attrs}}
		if err := c.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != tc.allow {
			t.Errorf("%+v: allowed = %v, want %v", tc.attrs, review.Status.Allowed, tc.allow)
		}
	}
	for _, tc := range []struct {
		path  string
		allow bool
	}{{"/apis", true}, {"/apis/widgethub.io/v1alpha1", true}, {"/version", true}, {"/readyz", true}, {"/metrics", false}, {"/logs", false}} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: tc.path, Verb: "get"}}}
		if err := c.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != tc.allow {
			t.Errorf("get %s: allowed = %v, want %v", tc.path, review.Status.Allowed, tc.allow)
		}
	}

}

// checkOperatorRequests makes, as c, the requests the operator makes in cp,
// and some it must not be able to make.
func checkOperatorRequests(t *testing.T, cp *fleet.ControlPlane, c client.Client) {
	t.Helper()
	ctx := context.Background()
	w := adminWidget(t, cp, "shop", "perm")
	if err := c.List(ctx, &v1alpha1.WidgetList{}); err != nil {
		t.Errorf("list Widgets: %v", err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"availableReplicas":1}}`))
	if err := c.Status().Patch(ctx, w.DeepCopy(), patch); err != nil {
		t.Errorf("patch Widget status: %v", err)
	}
	// Server-side apply as the reconciler does it: the first creates the
	// Deployment, the second changes it.
	for _, replicas := range []int32{1, 2} {
		if err := applyAsReconciler(ctx, c, widgetChild(w, replicas)); err != nil {
			t.Errorf("apply the Widget's Deployment with %d replicas: %v", replicas, err)
		}
	}
	deploy := &appsv1.Deployment{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(w), deploy); err != nil {
		t.Fatal(err)
	}
	if *deploy.Spec.Replicas != 2 {
		t.Errorf("the Deployment has %d replicas after the second apply, want 2", *deploy.Spec.Replicas)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nope"}, Spec: deploy.Spec.Template.Spec}
	forbidden := map[string]error{
		"get Secret":        c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "x"}, &corev1.Secret{}),
		"delete Namespace":  c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}),
		"update Deployment": c.Update(ctx, deploy.DeepCopy()),
		"delete Deployment": c.Delete(ctx, deploy.DeepCopy()),
		"create Widget":     c.Create(ctx, &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nope"}}),
		"create Pod":        c.Create(ctx, pod),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) || isPolicyDenial(err) {
			t.Errorf("%s with the hub's identity: err = %v, want Forbidden by RBAC", what, err)
		}
	}
}

// checkPolicy makes, as c, Deployment writes in cp that RBAC allows and the
// member admission policy refuses.
func checkPolicy(t *testing.T, cp *fleet.ControlPlane, c client.Client) {
	t.Helper()
	ctx := context.Background()
	w := adminWidget(t, cp, "shop", "fenced")
	unlabelled := widgetChild(w, 1)
	delete(unlabelled.Labels, "app.kubernetes.io/managed-by")
	unowned := widgetChild(w, 1)
	unowned.OwnerReferences = nil
	notController := widgetChild(w, 1)
	notController.OwnerReferences[0].Controller = ptr.To(false)
	system := adminWidget(t, cp, metav1.NamespaceSystem, "fenced")
	for what, d := range map[string]*appsv1ac.DeploymentApplyConfiguration{
		"in kube-system":                      widgetChild(system, 1),
		"without the managed-by label":        unlabelled,
		"without an owner":                    unowned,
		"owned by a Widget not as controller": notController,
	} {
		if err := applyAsReconciler(ctx, c, d); !isPolicyDenial(err) {
			t.Errorf("apply a Deployment %s as the hub: err = %v, want a denial by the admission policy", what, err)
		}
	}
	// Updates are fenced too: the hub cannot take the label off its own Deployment.
	if err := applyAsReconciler(ctx, c, widgetChild(w, 1)); err != nil {
		t.Fatalf("apply the Widget's Deployment: %v", err)
	}
	if err := applyAsReconciler(ctx, c, unlabelled); !isPolicyDenial(err) {
		t.Errorf("remove the managed-by label as the hub: err = %v, want a denial by the admission policy", err)
	}
	// The policy is about the hub's identity only: the admin may.
	if err := applyAsReconciler(ctx, cp.Client, widgetChild(system, 1)); err != nil {
		t.Errorf("the admin applies a Deployment in kube-system: %v", err)
	}
}

// adminWidget creates a Widget as cp's admin, deleted at the end of the test.
func adminWidget(t *testing.T, cp *fleet.ControlPlane, namespace, name string) *v1alpha1.Widget {
	t.Helper()
	ensureNamespace(t, cp, namespace)
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := cp.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cp.Client.Delete(ctx, w)
		// envtest runs no garbage collector.
		_ = cp.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: w.ObjectMeta})
	})
	return w
}

// widgetChild is w's Deployment as the Widget reconciler applies it, with
// replicas: the reconciler's own DesiredDeployment.
func widgetChild(w *v1alpha1.Widget, replicas int32) *appsv1ac.DeploymentApplyConfiguration {
	w = w.DeepCopy()
	w.Spec.Replicas = &replicas
	return widget.DesiredDeployment(w)
}

// applyAsReconciler server-side applies d with the reconciler's field manager.
func applyAsReconciler(ctx context.Context, c client.Client, d *appsv1ac.DeploymentApplyConfiguration) error {
	return c.Apply(ctx, d, client.FieldOwner(widget.FieldManager), client.ForceOwnership)
}

// isPolicyDenial reports whether err is the member admission policy's denial.
func isPolicyDenial(err error) bool {
	return apierrors.IsForbidden(err) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+plugin.MemberAdmissionPolicy+"' with binding '"+plugin.MemberAdmissionPolicy+"' denied request")
}

func TestUnjoinRemovesWhatJoinMade(t *testing.T) {
	ctx := context.Background()
	beta := testFleet.Member("beta")
	join(t, "beta", "beta")
	c, _ := registrationClient(t, "beta")
	mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberClusterRole}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberClusterRole}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: plugin.MemberServiceAccount}},
		&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberAdmissionPolicy}},
		&admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberAdmissionPolicy}},
	} {
		if err := beta.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after unjoin --cleanup: err = %v, want NotFound", obj, obj.GetName(), err)
		}
	}
	// join created the namespace, so it is being deleted (envtest runs no
	// namespace controller to finish it).
	ns := &corev1.Namespace{}
	if err := beta.Client.Get(ctx, client.ObjectKey{Name: plugin.MemberNamespace}, ns); err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s made by join survives unjoin --cleanup", plugin.MemberNamespace)
	}
	// The token can do nothing now, and is revoked once the API server's
	// token cache (10s) lets go of it.
	if err := c.List(ctx, &v1alpha1.WidgetList{}); !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Errorf("the hub's token after unjoin --cleanup: err = %v, want Forbidden or Unauthorized", err)
	}
	NewWithT(t).Eventually(func() error {
		return c.List(ctx, &v1alpha1.WidgetList{})
	}, time.Minute, 250*time.Millisecond).Should(Satisfy(apierrors.IsUnauthorized), "the hub's token after unjoin --cleanup")
	// Widgets stay servable: the CRD is kept.
	if err := beta.Client.List(ctx, &v1alpha1.WidgetList{}); err != nil {
		t.Errorf("the Widget CRD should survive unjoin --cleanup: %v", err)
	}
	waitNamespaceGone(t, beta, plugin.MemberNamespace)
}

func TestCleanupKeepsWhatJoinDidNotMake(t *testing.T) {
	ctx := context.Background()
	alpha := testFleet.Member("alpha")
	// A namespace that exists before join is the user's.
	ensureNamespace(t, alpha, plugin.MemberNamespace)
	t.Cleanup(func() { deleteNamespace(t, alpha, plugin.MemberNamespace) })
	join(t, "alpha", "alpha")
	unjoinCleanup(t, "alpha", "alpha")
	mustRun(t, "unjoin", "alpha", "--cleanup", "--member-context", "alpha")
	ns := &corev1.Namespace{}
	if err := alpha.Client.Get(ctx, client.ObjectKey{Name: plugin.MemberNamespace}, ns); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("namespace %s existed before join and must stay: err = %v, deleting = %v", plugin.MemberNamespace, err, ns.DeletionTimestamp)
	}
}

// bindingsOf lists the (Cluster)RoleBindings of subject as "Kind/name->role".
func bindingsOf(t *testing.T, cp *fleet.ControlPlane, subject rbacv1.Subject) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var crbs rbacv1.ClusterRoleBindingList
	var rbs rbacv1.RoleBindingList
	if err := errors.Join(cp.Client.List(ctx, &crbs), cp.Client.List(ctx, &rbs)); err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		if slices.Contains(b.Subjects, subject) {
			out = append(out, "ClusterRoleBinding/"+b.Name+"->"+b.RoleRef.Name)
		}
	}
	for _, b := range rbs.Items {
		if slices.Contains(b.Subjects, subject) {
			out = append(out, "RoleBinding/"+b.Namespace+"/"+b.Name+"->"+b.RoleRef.Name)
		}
	}
	return out
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool {
		return slices.Equal(x.Verbs, y.Verbs) && slices.Equal(x.APIGroups, y.APIGroups) &&
			slices.Equal(x.Resources, y.Resources) && slices.Equal(x.ResourceNames, y.ResourceNames) &&
			slices.Equal(x.NonResourceURLs, y.NonResourceURLs)
	})
}

func ensureNamespace(t *testing.T, cp *fleet.ControlPlane, name string) {
	t.Helper()
	if err := fleet.EnsureNamespace(context.Background(), cp.Client, name); err != nil {
		t.Fatal(err)
	}
}

// deleteNamespace deletes a namespace and waits until it is gone.
func deleteNamespace(t *testing.T, cp *fleet.ControlPlane, name string) {
	t.Helper()
	err := cp.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	waitNamespaceGone(t, cp, name)
}

// waitNamespaceGone finishes a namespace deletion, playing the namespace
// controller envtest does not run: it drops the kubernetes finalizer.
func waitNamespaceGone(t *testing.T, cp *fleet.ControlPlane, name string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, ns); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	ns.Spec.Finalizers = nil
	if err := cp.Client.SubResource("finalize").Update(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("finalize namespace %s: %v", name, err)
	}
}

// subjectOfHub is the ServiceAccount join creates for the hub.
func subjectOfHub() rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: plugin.MemberServiceAccount, Namespace: plugin.MemberNamespace}
}
