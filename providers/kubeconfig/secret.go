package kubeconfig

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewSecret returns the registration Secret of the member called name.
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
