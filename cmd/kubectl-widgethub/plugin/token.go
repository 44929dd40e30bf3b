package plugin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters/connect"
)

// Each registration's token is bound to a Secret of its own in the member
// (the TokenRequest API binds tokens to a Pod, a Secret or a Node): deleting
// that Secret revokes the token, and only that token. The registration Secret
// on the hub names it in an annotation.
const (
	// TokenSecretPrefix starts the name of every Secret a token is bound to.
	TokenSecretPrefix = MemberServiceAccount + "-token-"
	// TokenSecretLabel marks, with "true", the Secrets tokens are bound to.
	TokenSecretLabel = "widgethub.io/member-token"
	// TokenSecretAnnotation on a registration Secret names the Secret in the
	// member's widgethub-system namespace that its token is bound to.
	TokenSecretAnnotation = registration.TokenSecretAnnotation
	// registrationAnnotation on a token Secret names, for people, the
	// registration (namespace/name on the hub) that holds its token.
	registrationAnnotation = "widgethub.io/registration"
)

// createTokenSecret creates, in the member namespace, the Secret the new
// token of registration (namespace/name on the hub) is bound to.
func createTokenSecret(ctx context.Context, c *kube, registration string) (*corev1.Secret, error) {
	labels := map[string]string{TokenSecretLabel: "true"}
	for k, v := range managedBy {
		labels[k] = v
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: MemberNamespace, GenerateName: TokenSecretPrefix, Labels: labels,
			Annotations: map[string]string{registrationAnnotation: registration},
		},
		Type: corev1.SecretTypeOpaque,
	}
	if err := c.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create the Secret the token is bound to in %s: %w", MemberNamespace, err)
	}
	return s, nil
}

// mintToken asks the TokenRequest API for a token of the member's
// ServiceAccount bound to bound: deleting bound revokes the token (so does
// deleting the ServiceAccount). The API server may shorten ttl; the returned
// time is the real expiry: the token's exp claim, which clusters shows. The
// status's expirationTimestamp can be a second off it, as kube-apiserver
// reads its clock once for the status and again for the claims.
func mintToken(ctx context.Context, c *kube, ttl time.Duration, bound *corev1.Secret) (token string, expires time.Time, err error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MemberServiceAccount, Namespace: MemberNamespace}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(connect.TokenRequestSeconds(ttl)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: bound.Name, UID: bound.UID},
	}}
	if err := c.CreateSubresource(ctx, sa, "token", req); err != nil {
		return "", time.Time{}, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", MemberNamespace, MemberServiceAccount, err)
	}
	if exp, ok := tokenExpiry(req.Status.Token); ok {
		return req.Status.Token, exp, nil
	}
	return req.Status.Token, req.Status.ExpirationTimestamp.Time, nil
}

// revokeToken deletes the Secret name that a registration's token is bound
// to, which revokes the token. It deletes only a Secret join made for a
// token (the prefix and labels): the name comes from the hub, and the hub
// must not be able to make the member's admin delete anything else. It says
// on out what it did.
func revokeToken(ctx context.Context, m *cluster, name string, out io.Writer) error {
	if !strings.HasPrefix(name, TokenSecretPrefix) {
		fmt.Fprintf(out, "%s: kept Secret %s/%s: not a token Secret of join (its name does not start with %s)\n", m.role, MemberNamespace, name, TokenSecretPrefix)
		return nil
	}
	s := &corev1.Secret{}
	err := m.client.Get(ctx, types.NamespacedName{Namespace: MemberNamespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(out, "%s: token Secret %s/%s is already gone (or belongs to another member): nothing to revoke here\n", m.role, MemberNamespace, name)
		return nil
	case err != nil:
		return fmt.Errorf("%s: get token Secret %s/%s: %w", m.role, MemberNamespace, name, err)
	case !isTokenSecret(s):
		fmt.Fprintf(out, "%s: kept Secret %s/%s: join did not make it for a token (no labels %s=true, %s=%s)\n",
			m.role, MemberNamespace, name, TokenSecretLabel, managedByLabel, fieldManager)
		return nil
	}
	if err := m.client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: delete token Secret %s/%s: %w", m.role, MemberNamespace, name, err)
	}
	fmt.Fprintf(out, "%s: deleted token Secret %s/%s: its token is revoked\n", m.role, MemberNamespace, name)
	return nil
}

// isTokenSecret reports whether s is a Secret join made for a token to be bound to.
func isTokenSecret(s *corev1.Secret) bool {
	return s.Labels[TokenSecretLabel] == "true" && s.Labels[managedByLabel] == fieldManager && strings.HasPrefix(s.Name, TokenSecretPrefix)
}

// expiryOf is when the token of the registration Secret s expires (RFC 3339,
// UTC), or "-" when that is unknown.
func expiryOf(s *corev1.Secret) string {
	if exp, ok := tokenExpiry(viewKubeconfig(s.Data[registration.SecretKey]).token); ok {
		return exp.Format(time.RFC3339)
	}
	return "-"
}

// tokenExpiry is the exp claim of a JWT, read without verifying the token:
// it only tells the user when to renew. ok is false for a token that is no
// JWT or has no exp.
func tokenExpiry(token string) (expires time.Time, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == "" {
		return time.Time{}, false
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0).UTC(), true
}
