package hubtest

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/widgethub/widgethub/internal/fleet"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// HostPort is the host:port of cp's API server.
func HostPort(t *testing.T, cp *fleet.ControlPlane) string {
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// EditKubeconfig is kubeconfig with edit applied to its current cluster and user.
func EditKubeconfig(t *testing.T, kubeconfig []byte, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	out, err := fleet.EditKubeconfig(kubeconfig, edit)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TokenKubeconfig is cp's kubeconfig authenticating with token instead of a client certificate.
func TokenKubeconfig(t *testing.T, cp *fleet.ControlPlane, token string) []byte {
	fleet.HandOver(token)
	return EditKubeconfig(t, cp.Kubeconfig, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.ClientCertificateData, u.ClientKeyData, u.Token = nil, nil, token
	})
}

// ServiceAccountToken creates a ServiceAccount in cp (bound to clusterRole
// unless empty) and mints a token for it.
func ServiceAccountToken(t *testing.T, cp *fleet.ControlPlane, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	EnsureNamespace(t, cp, "widgethub-system")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "widgethub-system", Name: name}}
	if err := cp.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if clusterRole != "" {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}},
		}
		if err := cp.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return MintToken(t, cp, sa.Namespace, sa.Name)
}

// MintToken is a token of the ServiceAccount ns/name, from the TokenRequest API.
func MintToken(t *testing.T, cp *fleet.ControlPlane, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ns, name
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cp.Client.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("mint a token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// InstallMemberRole installs the member ClusterRole generated from the Widget reconciler's RBAC markers.
func InstallMemberRole(t *testing.T, cp *fleet.ControlPlane) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fleet.CRDPaths()[0], "..", "..", "member-rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TCPProxied puts a fleet.Proxy (TCP, which a test can take down or hang)
// in front of cp for the rest of the test and returns it with cp's admin
// kubeconfig pointed at it.
func TCPProxied(t *testing.T, cp *fleet.ControlPlane) (*fleet.Proxy, []byte) {
	t.Helper()
	proxy, err := fleet.NewProxy(HostPort(t, cp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Down)
	return proxy, EditKubeconfig(t, cp.Kubeconfig,
		func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "https://" + proxy.Addr() })
}

// FrontKubeconfig is the kubeconfig of cp reached through front (a
// fleet.HTTPProxy or fleet.Front, which a client certificate cannot pass) as
// the ServiceAccount sa bound to the member role; the suite's log scans
// look for its token.
func FrontKubeconfig(t *testing.T, front interface {
	Kubeconfig(kubeconfig []byte, token string) ([]byte, error)
}, cp *fleet.ControlPlane, sa string) []byte {
	t.Helper()
	InstallMemberRole(t, cp)
	token := ServiceAccountToken(t, cp, sa, "widgethub-member")
	fleet.HandOver(token)
	kubeconfig, err := front.Kubeconfig(cp.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
