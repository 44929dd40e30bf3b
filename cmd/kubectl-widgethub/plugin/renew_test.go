package plugin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// join marks its registration renewable and grants the hub, in the member,
// what renewing its token takes and nothing more: a token of its own
// ServiceAccount, bound to the registration's Secret, which the API server
// issues without the hub reading that Secret; no token of another
// ServiceAccount or bound to anything else, no Secret read. unjoin --cleanup deletes the Role and its
// binding with the rest.
func TestJoinGrantsTokenRenewalOnly(t *testing.T) {
	ctx := context.Background()
	alpha := testFleet.Member("alpha")
	unjoinCleanup(t, "alpha", "alpha")
	join(t, "alpha", "alpha", "--token-ttl", "10m")

	secret := registrationSecret(t, "alpha")
	if secret.Annotations[registration.RenewTokenAnnotation] != "true" {
		t.Errorf("registration annotations %v: want %s=true", secret.Annotations, registration.RenewTokenAnnotation)
	}
	role := &rbacv1.Role{}
	if err := alpha.Client.Get(ctx, client.ObjectKey{Namespace: plugin.MemberNamespace, Name: plugin.MemberClusterRole}, role); err != nil {
		t.Fatalf("the member Role: %v", err)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{plugin.MemberServiceAccount}, Verbs: []string{"create"}}}
	if !equality.Semantic.DeepEqual(role.Rules, want) {
		t.Errorf("member Role rules %+v, want %+v", role.Rules, want)
	}
	binding := &rbacv1.RoleBinding{}
	if err := alpha.Client.Get(ctx, client.ObjectKey{Namespace: plugin.MemberNamespace, Name: plugin.MemberClusterRole}, binding); err != nil {
		t.Fatalf("the member RoleBinding: %v", err)
	}
	if binding.RoleRef.Kind != "Role" || len(binding.Subjects) != 1 || binding.Subjects[0].Name != plugin.MemberServiceAccount {
		t.Errorf("member RoleBinding %+v %+v", binding.RoleRef, binding.Subjects)
	}

	c, token := registrationClient(t, "alpha")
	claims, ok := connect.ParseTokenClaims(token)
	if !ok || claims.Secret != secret.Annotations[plugin.TokenSecretAnnotation] || claims.Lifetime() != 10*time.Minute {
		t.Fatalf("the minted token's claims %+v (ok %v); want bound to %s for 10m", claims, ok, secret.Annotations[plugin.TokenSecretAnnotation])
	}
	request := func(sa, bound string, uid string) error {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
		if bound != "" {
			req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: bound, UID: k8stypes.UID(uid)}
		}
		return c.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: sa}}, req)
	}
	// Its own, bound to its Secret by name and UID, as the hub renews.
	if err := request(plugin.MemberServiceAccount, claims.Secret, string(claims.SecretUID)); err != nil {
		t.Errorf("the hub's token cannot renew itself: %v", err)
	}
	// Another ServiceAccount's: forbidden.
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: "other"}}
	if err := alpha.Client.Create(ctx, other); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := request("other", claims.Secret, ""); !apierrors.IsForbidden(err) {
		t.Errorf("a token of another ServiceAccount: err = %v, want Forbidden", err)
	}
	// Its own, bound to nothing or to a Secret join did not make: refused
	// by the token policy, so that no token outlives unjoin.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: "payments-db"}}
	if err := alpha.Client.Create(ctx, foreign); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for what, bound := range map[string]string{"bound to nothing": "", "bound to a Secret join did not make": foreign.Name} {
		if err := request(plugin.MemberServiceAccount, bound, ""); !apierrors.IsForbidden(err) ||
			!strings.Contains(err.Error(), "widgethub requests only tokens bound to a Secret that kubectl widgethub join made") {
			t.Errorf("a token of its own %s: err = %v, want the token policy's refusal", what, err)
		}
	}
	if err := alpha.Client.Delete(ctx, foreign); err != nil {
		t.Error(err)
	}
	// Bound to a Secret that was deleted and made again under the name: a conflict.
	if err := request(plugin.MemberServiceAccount, claims.Secret, "00000000-0000-0000-0000-000000000000"); !apierrors.IsConflict(err) {
		t.Errorf("a token bound to another UID: err = %v, want Conflict", err)
	}
	// The Secret itself stays out of reach.
	if err := c.Get(ctx, client.ObjectKey{Namespace: plugin.MemberNamespace, Name: claims.Secret}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading the bound Secret: err = %v, want Forbidden", err)
	}
	if err := alpha.Client.Delete(ctx, other); err != nil {
		t.Error(err)
	}
}
