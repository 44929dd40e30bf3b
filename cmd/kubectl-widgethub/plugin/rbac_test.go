package plugin_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

// TestMemberRoleIsWhatApplyNeeds shows why the generated member role keeps
// `create` on Deployments and `update` on widgets/finalizers although the
// reconciler only patches: a server-side apply that creates its object is
// authorized as create too, and with the OwnerReferencesPermissionEnforcement
// admission plugin (on in OpenShift and hardened clusters, off in envtest and
// kind) a controller owner reference with blockOwnerDeletion needs update on
// the owner's finalizers. It runs its own API server with that plugin on.
func TestMemberRoleIsWhatApplyNeeds(t *testing.T) {
	env := &envtest.Environment{Scheme: clusters.NewScheme(), CRDDirectoryPaths: fleet.CRDPaths(), ErrorIfCRDPathMissing: true}
	env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	admin, err := client.New(cfg, client.Options{Scheme: clusters.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	cp := &fleet.ControlPlane{Name: "gc", Config: cfg, Client: admin}

	full := generatedMemberRules(t)
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		// refusal is part of the Forbidden error expected, "" when the apply must succeed.
		refusal string
	}{
		{"generated role", full, ""},
		{"without create on deployments", without(full, "deployments", "create"), `cannot create resource "deployments"`},
		{"without update on widgets/finalizers", without(full, "widgets/finalizers", "update"), "cannot set blockOwnerDeletion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serviceAccountWithRules(t, cp, "shop", tc.rules)
			w := adminWidget(t, cp, "shop", "gc")
			err := applyAsReconciler(context.Background(), c, widgetChild(w, 1))
			if tc.refusal == "" && err != nil {
				t.Errorf("apply a missing Deployment: %v", err)
			}
			if tc.refusal != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.refusal)) {
				t.Errorf("apply a missing Deployment: err = %v, want Forbidden: ...%s...", err, tc.refusal)
			}
		})
	}
}

// without returns rules without verb on resource.
func without(rules []rbacv1.PolicyRule, resource, verb string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for _, r := range rules {
		r := *r.DeepCopy()
		if slices.Contains(r.Resources, resource) {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
		}
		if len(r.Verbs) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// serviceAccountWithRules creates a ServiceAccount in namespace of cp, grants
// it rules cluster-wide, and returns a client with a token of it once the
// grant is in effect (rules must include list on Widgets).
func serviceAccountWithRules(t *testing.T, cp *fleet.ControlPlane, namespace string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cp, namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "rules-"}}
	if err := cp.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa.Name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: namespace}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{binding, role, sa} {
			_ = cp.Client.Delete(ctx, obj)
		}
	})
	req := &authenticationv1.TokenRequest{}
	if err := cp.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = req.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: clusters.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() error {
		return c.List(ctx, &v1alpha1.WidgetList{}, client.Limit(1))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "the new ServiceAccount lists Widgets")
	return c
}
