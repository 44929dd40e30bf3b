package registration

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// DefaultNamespace is the default registration namespace on the hub.
	DefaultNamespace = "widgethub-system"

	// SecretLabel marks a Secret as a member registration when set to "true".
	SecretLabel = "widgethub.io/kubeconfig"
	// SecretKey is the registration Secret's data key that holds the kubeconfig.
	SecretKey = "kubeconfig"

	// TokenSecretAnnotation on a registration Secret names the Secret in the
	// member's widgethub-system namespace that its token is bound to
	// (written by kubectl widgethub join).
	TokenSecretAnnotation = "widgethub.io/member-token-secret"
	// RenewTokenAnnotation, "true" on a registration Secret, lets the hub
	// renew its token and rewrite its kubeconfig with the new one. join sets
	// it when it installs the member role that allows the renewal; the hub
	// never rewrites a registration without it.
	RenewTokenAnnotation = "widgethub.io/renew-token"

	// PinAnnotation on a registration names the replica of a sharded hub
	// that should serve its member; it is followed while that replica is
	// live and within its fair share, unless the hub allows pins beyond it.
	PinAnnotation = "widgethub.io/replica"
	// TokenIssuedAnnotation is the hub's record of the token it last wrote
	// into a registration Secret, written with it:
	// "minted=<RFC 3339 time> lifetime=<seconds>s token=<digest>": when the
	// hub asked the member for it (on the hub's clock), the lifetime it
	// asked for, and a digest of the token. The hub schedules the next
	// renewal from it, not from what the token claims.
	TokenIssuedAnnotation = "widgethub.io/token-issued"
)

// NewSecret returns the registration Secret of the member called name, in
// namespace, holding kubeconfig.
func NewSecret(namespace, name string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels:    map[string]string{SecretLabel: "true"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretKey: kubeconfig},
	}
}
