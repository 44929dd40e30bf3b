package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/clusters/connect"
)

// ReissueToken signs a copy of token, a ServiceAccount token this control
// plane issued, as if it had been issued earlier so that it expires at
// expiry: same lifetime, issuer, audiences and subject, bound to the same
// objects. Tests use it to watch a token expire, which a token issued now
// (10 minutes at least) would make them wait for.
//
// It signs with the key envtest gave the API server (sa-signer.key in its
// certificate directory), which it accepts as one of its own.
func (cp *ControlPlane) ReissueToken(token string, expiry time.Time) (string, error) {
	payload, ok := connect.JWTPayload(token)
	if !ok {
		return "", errors.New("not a JWT")
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", fmt.Errorf("decode claims: %w", err)
	}
	iat, iok := claims["iat"].(float64)
	exp, eok := claims["exp"].(float64)
	if !iok || !eok || exp <= iat {
		return "", errors.New("the token has no lifetime (iat, exp)")
	}
	issued := expiry.Unix() - int64(exp-iat)
	claims["iat"], claims["nbf"], claims["exp"] = issued, issued, expiry.Unix()
	delete(claims, "jti")

	key, err := cp.serviceAccountKey()
	if err != nil {
		return "", err
	}
	header, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	if payload, err = json.Marshal(claims); err != nil {
		return "", err
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return "", err
	}
	// JWS ES256: r and s, 32 bytes each, big-endian.
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	reissued := signed + "." + base64.RawURLEncoding.EncodeToString(sig)
	HandOver(reissued)
	return reissued, nil
}

// serviceAccountKey reads the key the API server signs its tokens with.
func (cp *ControlPlane) serviceAccountKey() (*ecdsa.PrivateKey, error) {
	if cp.Env == nil || cp.Env.ControlPlane.APIServer == nil {
		return nil, fmt.Errorf("control plane %q is not running", cp.Name)
	}
	data, err := os.ReadFile(filepath.Join(cp.Env.ControlPlane.APIServer.CertDir, "sa-signer.key"))
	if err != nil {
		return nil, fmt.Errorf("service account key of %q: %w", cp.Name, err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("service account key of %q: no PEM block", cp.Name)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("service account key of %q: %w", cp.Name, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("service account key of %q is a %T, not ECDSA", cp.Name, parsed)
	}
	return key, nil
}

// AdminToken is a one-hour token of a ServiceAccount called name in the
// default namespace, bound to cluster-admin (both made when missing): a
// bearer token that passes a TLS-terminating HTTPProxy, which a client
// certificate cannot.
func (cp *ControlPlane) AdminToken(ctx context.Context, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if err := cp.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ServiceAccount %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}},
	}
	if err := cp.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ClusterRoleBinding %s: %w", name, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cp.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("mint a token for ServiceAccount %s: %w", name, err)
	}
	HandOver(tr.Status.Token)
	return tr.Status.Token, nil
}
