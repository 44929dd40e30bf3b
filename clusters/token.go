package clusters

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/clusters/connect"
)

// The member role kubectl widgethub join installs lets the hub ask for a
// token of its own ServiceAccount, and of no other (a Role in the member's
// widgethub-system namespace, config/member-rbac/role.yaml). Binding the new
// token to a Secret needs no right on Secrets: the API server reads the bound
// object itself.
// +kubebuilder:rbac:groups="",namespace=widgethub-system,resources=serviceaccounts/token,verbs=create,resourceNames=widgethub-member

// RenewToken asks the member, with the member's current credentials, for a
// new token of the ServiceAccount that claims names, bound to the same
// Secret (name and UID: a Secret deleted and created again under that name
// does not take the token), for lifetime. The request passes the
// member's gate like every other. It returns the token and its expiry.
func (m *Member) RenewToken(ctx context.Context, claims connect.TokenClaims, lifetime time.Duration) (token string, expires time.Time, err error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: claims.Namespace, Name: claims.ServiceAccount}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(connect.TokenRequestSeconds(lifetime)),
	}}
	if claims.Secret != "" {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: claims.Secret, UID: claims.SecretUID}
	}
	if err := m.GetClient().SubResource("token").Create(ctx, sa, req); err != nil {
		return "", time.Time{}, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", claims.Namespace, claims.ServiceAccount, err)
	}
	return req.Status.Token, req.Status.ExpirationTimestamp.Time, nil
}
