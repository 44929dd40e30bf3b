package plugin_test

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// TestJoinTakesOverNothingItDidNotCreate creates, before join, objects with
// join's names but without its label: join must refuse to touch them, unjoin
// --cleanup must keep them, and only join --adopt takes them over.
func TestJoinTakesOverNothingItDidNotCreate(t *testing.T) {
	ctx := context.Background()
	beta := testFleet.Member("beta")
	for _, tc := range []struct {
		what string
		obj  client.Object
	}{
		{"ClusterRole " + plugin.MemberClusterRole, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberClusterRole, Labels: map[string]string{"team": "platform"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
		}},
		{"ClusterRoleBinding " + plugin.MemberClusterRole, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberClusterRole},
			// The same roleRef as join's: --adopt cannot change it (it is immutable).
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: plugin.MemberClusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform"}},
		}},
		{"ValidatingAdmissionPolicy " + plugin.MemberAdmissionPolicy, &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: plugin.MemberAdmissionPolicy},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					},
				}}},
				Validations: []admissionv1.Validation{{Expression: "true"}},
			},
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if err := beta.Client.Create(ctx, tc.obj); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = beta.Client.Delete(ctx, tc.obj) })
			before := tc.obj.DeepCopyObject().(client.Object)

			r := run(t, "join", "beta", "--member-context", "beta")
			if r.code != plugin.ExitConflict || !strings.Contains(r.stderr, tc.what+" already exist(s) and kubectl widgethub join did not create it") ||
				!strings.Contains(r.stderr, "pass --adopt to take it over") {
				t.Errorf("join with a foreign %s: want exit %d and a message naming it, got %s", tc.what, plugin.ExitConflict, r)
			}
			if got := bindingsOf(t, beta, subjectOfHub()); len(got) != 0 {
				t.Errorf("a refused join bound the hub's ServiceAccount: %v", got)
			}
			err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: "beta"}, &corev1.Secret{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("a refused join registered beta: err = %v", err)
			}
			mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
			expectUnchanged(t, before, "after a refused join and unjoin --cleanup")

			// --adopt takes it over: join's, it goes with unjoin --cleanup.
			r = join(t, "beta", "beta", "--adopt")
			if !strings.Contains(r.stderr, "warning: member \"beta\": adopting "+tc.what) {
				t.Errorf("join --adopt does not warn that it adopts %s:\n%s", tc.what, r.stderr)
			}
			mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
			waitNamespaceGone(t, beta, plugin.MemberNamespace)
			if err := beta.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.obj); !apierrors.IsNotFound(err) {
				t.Errorf("%s adopted by join after unjoin --cleanup: err = %v, want NotFound", tc.what, err)
			}
		})
	}
}

// expectUnchanged checks that the object before still exists as it was.
func expectUnchanged(t *testing.T, before client.Object, when string) {
	t.Helper()
	now := before.DeepCopyObject().(client.Object)
	if err := testFleet.Member("beta").Client.Get(context.Background(), client.ObjectKeyFromObject(before), now); err != nil {
		t.Fatalf("%T %s %s: %v", before, before.GetName(), when, err)
	}
	if now.GetResourceVersion() != before.GetResourceVersion() || !equality.Semantic.DeepEqual(now.GetLabels(), before.GetLabels()) {
		t.Errorf("%T %s changed %s: labels %v, was %v", before, before.GetName(), when, now.GetLabels(), before.GetLabels())
	}
}

// TestCleanupKeepsANamespaceWithForeignObjects puts objects in the namespace
// join created: unjoin --cleanup deletes what join made but not the namespace,
// until it holds nothing else.
func TestCleanupKeepsANamespaceWithForeignObjects(t *testing.T) {
	ctx := context.Background()
	beta := testFleet.Member("beta")
	unjoinCleanup(t, "beta", "beta")
	join(t, "beta", "beta")
	foreign := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: "user-data"}},
		&v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: "user-widget"}},
	}
	for _, obj := range foreign {
		if err := beta.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	r := mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
	if want := "kept Namespace " + plugin.MemberNamespace + ": it holds objects join did not create: "; !strings.Contains(r.stdout, want) ||
		!strings.Contains(r.stdout, "ConfigMap user-data") || !strings.Contains(r.stdout, "Widget user-widget") {
		t.Errorf("unjoin --cleanup does not say it kept the namespace for ConfigMap user-data and Widget user-widget:\n%s", r.stdout)
	}
	ns := &corev1.Namespace{}
	if err := beta.Client.Get(ctx, client.ObjectKey{Name: plugin.MemberNamespace}, ns); err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("namespace %s with foreign objects after unjoin --cleanup: err = %v, deleting = %v", plugin.MemberNamespace, err, ns.DeletionTimestamp)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: plugin.MemberServiceAccount}}
	if err := beta.Client.Get(ctx, client.ObjectKeyFromObject(sa), sa); !apierrors.IsNotFound(err) {
		t.Errorf("the ServiceAccount after unjoin --cleanup: err = %v, want NotFound", err)
	}

	// Once they are gone, cleanup deletes the namespace.
	for _, obj := range foreign {
		if err := beta.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	r = mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
	if !strings.Contains(r.stdout, "deleted Namespace "+plugin.MemberNamespace) {
		t.Errorf("unjoin --cleanup of an emptied namespace:\n%s", r.stdout)
	}
}
