package plugin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// expiryNear checks the expiry join printed (RFC 3339) against the one asked
// for with the TTL ttl at about requested.
func expiryNear(t *testing.T, r result, requested time.Time, ttl time.Duration) {
	t.Helper()
	printed := mintedUntil(t, r)
	at, err := time.Parse(time.RFC3339, printed)
	if err != nil {
		t.Fatalf("join printed the expiry %q, not RFC 3339: %v", printed, err)
	}
	if want := requested.Add(ttl); at.Before(want.Add(-time.Minute)) || at.After(want.Add(time.Minute)) {
		t.Errorf("join printed valid until %s; --token-ttl %s asked for about %s", printed, ttl, want.UTC().Format(time.RFC3339))
	}
}

// --token-ttl: 7 days by default (the hub renews it), as asked (the API server here does not
// shorten it) otherwise, and shorter than 10 minutes refused before anything
// is written; the printed expiry is the token's.
func TestTokenTTL(t *testing.T) {
	unjoinCleanup(t, "alpha", "alpha")
	start := time.Now()
	r := join(t, "alpha", "alpha")
	expiryNear(t, r, start, plugin.DefaultTokenTTL)
	if plugin.DefaultTokenTTL != 7*24*time.Hour {
		t.Errorf("DefaultTokenTTL = %s; docs/plugin.md says 7 days (168h)", plugin.DefaultTokenTTL)
	}
	// The printed expiry is the token's own: what clusters shows.
	if got, want := clustersTokenExpiry(t, "alpha"), mintedUntil(t, r); got != want {
		t.Errorf("clusters shows TOKEN-EXPIRES %s; join printed %s", got, want)
	}

	start = time.Now()
	r = join(t, "alpha", "alpha", "--overwrite", "--token-ttl", "3h")
	expiryNear(t, r, start, 3*time.Hour)
	if got, want := clustersTokenExpiry(t, "alpha"), mintedUntil(t, r); got != want {
		t.Errorf("clusters shows TOKEN-EXPIRES %s; join printed %s", got, want)
	}

	before := registrationSecret(t, "alpha").ResourceVersion
	r = run(t, "join", "alpha", "--member-context", "alpha", "--overwrite", "--token-ttl", "9m59s")
	if r.code != plugin.ExitUsage || !strings.Contains(r.stderr, "--token-ttl 9m59s is shorter than the API server's minimum of 10m") {
		t.Errorf("join --token-ttl 9m59s: want exit %d and the minimum named, got %s", plugin.ExitUsage, r)
	}
	if got := registrationSecret(t, "alpha").ResourceVersion; got != before {
		t.Errorf("a refused --token-ttl changed the registration (resourceVersion %s -> %s)", before, got)
	}
}

// clustersTokenExpiry is the TOKEN-EXPIRES that clusters shows for name.
func clustersTokenExpiry(t *testing.T, name string) string {
	t.Helper()
	for _, row := range rows(mustRun(t, "clusters").stdout) {
		if len(row) >= 7 && row[0] == name {
			return row[6]
		}
	}
	t.Fatalf("clusters shows no row %s", name)
	return ""
}

// hangingServer accepts connections and never answers: a cluster that does
// not respond.
func hangingServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// --request-timeout bounds each request: a hub that accepts connections and
// never answers fails the command after about that long, not the default 15s.
func TestRequestTimeout(t *testing.T) {
	raw, err := clientcmd.LoadFromFile(kubeconfigs.All)
	if err != nil {
		t.Fatal(err)
	}
	raw.Clusters["hub"].Server = "https://" + hangingServer(t)
	hanging := filepath.Join(t.TempDir(), "hanging.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, hanging); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := run(t, "clusters", "--kubeconfig", hanging, "--context", "hub", "--request-timeout", "2s")
	took := time.Since(start)
	if r.code == 0 || !strings.Contains(r.stderr, "hub:") {
		t.Errorf("clusters against a hub that never answers: %s", r)
	}
	// The default is 15s: well past 2s and the allowance for retries.
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("clusters with --request-timeout 2s took %s against a hub that never answers", took)
	}

	help := mustRun(t, "clusters", "--help")
	if !strings.Contains(help.stdout, "--request-timeout duration") || !strings.Contains(help.stdout, "(default 15s)") {
		t.Errorf("clusters --help does not show --request-timeout with its default 15s:\n%s", help.stdout)
	}
	if plugin.DefaultRequestTimeout != 15*time.Second {
		t.Errorf("DefaultRequestTimeout = %s; docs/plugin.md says 15s", plugin.DefaultRequestTimeout)
	}
}

// widgets prints the table of the members it can read, and reports a member
// it cannot reach after it, on stderr, with a non-zero exit code.
func TestWidgetsReportsAnUnreadableMemberAfterTheTable(t *testing.T) {
	ctx := context.Background()
	joinAlphaAndBeta(t)
	createWidget(t, testFleet.Member("alpha"), "shop", "cart", 1, false)
	createWidget(t, testFleet.Member("beta"), "shop", "cart", 2, false)
	doc, err := fleet.EditKubeconfig(registrationSecret(t, "alpha").Data[registration.SecretKey], func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.Server = "https://127.0.0.1:1" // nothing listens there
	})
	if err != nil {
		t.Fatal(err)
	}
	registerForTest(t, "gone", doc)

	// stdout and stderr in one stream, in the order written.
	var out bytes.Buffer
	code := plugin.Run(ctx, []string{"--kubeconfig", kubeconfigs.All, "--context", "hub", "widgets", "-n", "shop"}, &out, &out)
	t.Logf("widgets -n shop: exit %d\n%s", code, out.String())
	if code == 0 {
		t.Error("widgets exited 0 with a member it could not read")
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	var header, alpha, beta, gonePos = -1, -1, -1, -1
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "CLUSTER":
			header = i
		case len(f) > 1 && f[0] == "alpha" && f[1] == "cart": // -n: no NAMESPACE column
			alpha = i
		case len(f) > 1 && f[0] == "beta" && f[1] == "cart":
			beta = i
		case strings.HasPrefix(l, "error: ") && strings.Contains(l, `cluster "gone"`):
			gonePos = i
		}
	}
	if header < 0 || alpha < 0 || beta < 0 {
		t.Fatalf("widgets did not print the readable members' table (header %d, alpha %d, beta %d)", header, alpha, beta)
	}
	if gonePos < 0 {
		t.Fatal(`widgets did not report the member "gone" with an error line`)
	}
	if gonePos < max(header, alpha, beta) {
		t.Errorf("the error about the unreadable member (line %d) comes before the end of the table (line %d)", gonePos, max(header, alpha, beta))
	}
}

// join checks that the new token can list Widgets before it registers: when
// the member refuses the token that (here through a proxy answering 403 to
// its Widget lists), nothing is registered on the hub and the token is
// revoked.
func TestJoinRegistersOnlyATokenThatCanListWidgets(t *testing.T) {
	ctx := context.Background()
	alpha := testFleet.Member("alpha")
	adminToken := clusterAdminToken(t, alpha)
	proxy, memberKubeconfig := proxiedKubeconfig(t, alpha, adminToken)
	// Only requests that are not the admin's: the new token's.
	proxy.Set(fleet.Fault{Status: http.StatusForbidden, Match: func(r *http.Request) bool {
		return r.Header.Get("Authorization") != "Bearer "+adminToken && strings.Contains(r.URL.Path, "/widgets")
	}})
	unjoinCleanup(t, "proxied", "alpha")
	secretsBefore := tokenSecretsIn(t, alpha)

	r := run(t, "join", "proxied", "--member-kubeconfig", memberKubeconfig)
	if r.code == 0 || !strings.Contains(r.stderr, "the new credentials do not work yet, nothing was registered on the hub") {
		t.Errorf("join with a token that cannot list Widgets: %s", r)
	}
	if _, faulted := proxy.Requests(); faulted == 0 {
		t.Error("the new token's Widget list never reached the member")
	}
	err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: "proxied"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("registration Secret proxied after a failed check: %v", err)
	}
	if after := tokenSecretsIn(t, alpha); len(after) != len(secretsBefore) {
		t.Errorf("the unregistered token is not revoked: token Secrets %v, before %v", after, secretsBefore)
	}
}

// clusterAdminToken mints a token for a cluster-admin ServiceAccount of cp
// (a client certificate cannot pass fleet.HTTPProxy, which terminates TLS).
// proxiedKubeconfig puts a fleet.HTTPProxy in front of cp and writes a
// kubeconfig that reaches cp through it with token, for the plugin's
// --member-kubeconfig.
func proxiedKubeconfig(t *testing.T, cp *fleet.ControlPlane, token string) (*fleet.HTTPProxy, string) {
	t.Helper()
	proxy, err := fleet.NewHTTPProxy(cp.Config.Host, cp.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	doc, err := proxy.Kubeconfig(cp.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), cp.Name+"-through-proxy.kubeconfig")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return proxy, path
}

func clusterAdminToken(t *testing.T, cp *fleet.ControlPlane) string {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cp, "kube-system")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "plugin-test-admin"}}
	if err := cp.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "plugin-test-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}},
	}
	if err := cp.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cp.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// tokenSecretsIn names the token Secrets join made in cp.
func tokenSecretsIn(t *testing.T, cp *fleet.ControlPlane) []string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := cp.Client.List(context.Background(), list, client.InNamespace(plugin.MemberNamespace)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, plugin.TokenSecretPrefix) {
			names = append(names, s.Name)
		}
	}
	return names
}

// Nothing the plugin prints holds a token or kubeconfig content (the
// registration's token, the admin's client key and certificate, a CA), and
// nothing it stores besides the registration's kubeconfig does: not the
// registration Secret's labels or annotations, not the token Secret in the
// member, which holds no data.
func TestNothingPrintedOrStoredHoldsCredentials(t *testing.T) {
	alpha := testFleet.Member("alpha")
	unjoinCleanup(t, "alpha", "alpha")
	var printed strings.Builder
	record := func(r result) { printed.WriteString(r.stdout + r.stderr) }
	record(join(t, "alpha", "alpha"))
	createWidget(t, alpha, "shop", "cart", 1, false)
	// The hub reports on alpha: clusters prints its MemberCluster too.
	createMemberCluster(t, &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "alpha"}, Status: engaged(1)})
	for _, format := range []string{"", "wide", "json", "yaml"} {
		record(mustRun(t, "clusters", "-o", format))
		record(mustRun(t, "widgets", "-A", "-o", format))
	}
	record(join(t, "alpha", "alpha", "--overwrite"))
	record(mustRun(t, "clusters"))

	reg := registrationSecret(t, "alpha")
	cfg, err := clientcmd.Load(reg.Data[registration.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(kubeconfigs.All)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	add := func(data []byte) {
		if len(data) == 0 {
			return
		}
		secrets = append(secrets, string(data), base64.StdEncoding.EncodeToString(data))
		for _, line := range strings.Split(string(data), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				secrets = append(secrets, line)
			}
		}
	}
	for _, u := range cfg.AuthInfos {
		add([]byte(u.Token))
	}
	for _, c := range cfg.Clusters {
		add(c.CertificateAuthorityData)
	}
	for _, u := range admin.AuthInfos {
		add(u.ClientKeyData)
		add(u.ClientCertificateData)
		add([]byte(u.Token))
	}
	if len(secrets) == 0 {
		t.Fatal("no credentials to look for")
	}
	look := func(where, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds credentials or kubeconfig content (%.12q...)", where, s)
				return
			}
		}
	}
	look("the plugin's output", printed.String())
	for k, v := range reg.Labels {
		look("registration label "+k, v)
	}
	for k, v := range reg.Annotations {
		look("registration annotation "+k, v)
	}
	bound := reg.Annotations[plugin.TokenSecretAnnotation]
	s := &corev1.Secret{}
	if err := alpha.Client.Get(context.Background(), client.ObjectKey{Namespace: plugin.MemberNamespace, Name: bound}, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Data) != 0 || len(s.StringData) != 0 || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("token Secret %s: type %s with %d data keys, want Opaque and none", bound, s.Type, len(s.Data))
	}
	for k, v := range s.Annotations {
		look("token Secret annotation "+k, v)
	}
}
