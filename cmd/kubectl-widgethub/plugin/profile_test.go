package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// accessProviderName is the access provider of the tests' provider files.
const accessProviderName = "widgethub-tokens"

var (
	profileCRDOnce sync.Once
	profileCRDErr  error
)

// installProfileCRD installs cluster-inventory-api's ClusterProfile CRD (from
// the module cache) on the hub, once: the hub serves ClusterProfiles from
// then on.
func installProfileCRD(t *testing.T) {
	t.Helper()
	profileCRDOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
		if err != nil {
			profileCRDErr = err
			return
		}
		crd := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "multicluster.x-k8s.io_clusterprofiles.yaml")
		_, profileCRDErr = envtest.InstallCRDs(testFleet.Hub.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true})
	})
	if profileCRDErr != nil {
		t.Fatalf("install the ClusterProfile CRD: %v", profileCRDErr)
	}
}

// createProfile creates the ClusterProfile name on the hub with one access
// provider, accessProviderName, for cluster; it is deleted when t ends.
func createProfile(t *testing.T, name string, cluster clientcmdv1.Cluster) {
	t.Helper()
	ctx := context.Background()
	p := &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: name},
		Spec: inventoryv1alpha1.ClusterProfileSpec{DisplayName: name, ClusterManager: inventoryv1alpha1.ClusterManager{Name: "plugin-test"}}}
	if err := testFleet.Hub.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, p) })
	p.Status = inventoryv1alpha1.ClusterProfileStatus{Conditions: []metav1.Condition{},
		AccessProviders: []inventoryv1alpha1.AccessProvider{{Name: accessProviderName, Cluster: cluster}}}
	if err := testFleet.Hub.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// writeProviderFile writes an administrator's access provider file whose
// provider name runs the built widgethub-credential with tokens, its token
// directory; extra fields are added to the provider.
func writeProviderFile(t *testing.T, name, tokens string, extra map[string]any) string {
	t.Helper()
	provider := map[string]any{"name": name, "execConfig": map[string]any{
		"apiVersion":         "client.authentication.k8s.io/v1",
		"command":            built(t, "cmd/widgethub-credential"),
		"args":               []string{"--token-dir=" + tokens},
		"provideClusterInfo": true,
	}}
	for k, v := range extra {
		provider[k] = v
	}
	data, err := json.Marshal(map[string]any{"providers": []any{provider}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A ClusterProfile holds no credentials: widgets reaches its member only
// with the hub's access provider file, through the exec plugin it names
// (here the real widgethub-credential), as the hub does, and says so plainly
// without it. alpha stays registered by its Secret; beta moves to a
// ClusterProfile, its token into the administrator's token directory.
func TestWidgetsOfClusterProfileMembers(t *testing.T) {
	ctx := context.Background()
	installProfileCRD(t)
	joinAlphaAndBeta(t)
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")
	createWidget(t, alpha, "shop", "cart", 1, true)
	createWidget(t, beta, "shop", "shelf", 2, false)

	// beta's registration Secret goes; its token, bound to its own Secret in
	// beta, goes into the token directory. That Secret is deleted when the
	// test ends (before unjoinCleanup), revoking the token.
	secret := registrationSecret(t, "beta")
	bound := tokenSecret(t, beta, "beta")
	t.Cleanup(func() {
		_ = beta.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: bound}})
	})
	cfg, err := clusters.RESTConfig(secret.Data[registration.SecretKey], clusters.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := cfg.REST.BearerToken
	tokens := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tokens, "beta"), 0o700); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{"token": token, "server": beta.Config.Host} {
		if err := os.WriteFile(filepath.Join(tokens, "beta", file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := testFleet.Hub.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// What a fleet manager publishes for beta: its server and CA, and the
	// exec extension naming the member for widgethub-credential.
	betaCluster := func(edit func(*clientcmdv1.Cluster)) clientcmdv1.Cluster {
		c := clientcmdv1.Cluster{Server: beta.Config.Host, CertificateAuthorityData: beta.Config.CAData,
			Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: []byte(`{"member":"beta"}`)}}}}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	createProfile(t, "beta", betaCluster(nil))
	// A profile named like a registration Secret: the member is the Secret's.
	createProfile(t, "alpha", betaCluster(nil))
	file := writeProviderFile(t, accessProviderName, tokens, nil)

	noToken := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, token) {
			t.Errorf("%s printed beta's token", what)
		}
	}
	// Without the file: alpha's Widgets, and beta reported plainly.
	r := run(t, "widgets", "-A")
	noToken("widgets -A", r)
	if got := rows(r.stdout); len(got) != 2 || strings.Join(got[1][:3], " ") != "alpha shop cart" {
		t.Errorf("widgets -A without the provider file: want the header and alpha's cart only:\n%s", r.stdout)
	}
	for _, want := range []string{
		`error: cluster "beta": registered by the ClusterProfile widgethub-system/beta, which holds no credentials: ` +
			`the hub reaches it through its administrator's access provider file; pass that file with --clusterprofile-provider-file to reach it the same way`,
		"error: 1 of 2 members could not be read",
	} {
		if r.code != 3 || !strings.Contains(r.stderr, want) {
			t.Errorf("widgets -A without the provider file: want exit 3 and %q, got %s", want, r)
		}
	}

	// With it: both members, each with its own Widgets.
	r = mustRun(t, "widgets", "-A", "--clusterprofile-provider-file", file)
	noToken("widgets -A --clusterprofile-provider-file", r)
	got := rows(r.stdout)
	if len(got) != 3 || strings.Join(got[1][:4], " ") != "alpha shop cart 1" || strings.Join(got[2][:4], " ") != "beta shop shelf 2" {
		t.Errorf("widgets -A with the provider file: want alpha's cart and beta's shelf:\n%s", r.stdout)
	}
	r = mustRun(t, "widgets", "-n", "shop", "--cluster", "beta", "-o", "json", "--clusterprofile-provider-file", file)
	items := decodeList[listedWidget](t, "json", r.stdout)
	if len(items) != 1 || items[0].Cluster != "beta" || items[0].Name != "shelf" {
		t.Errorf("widgets --cluster beta -o json: want beta's shelf, got %+v", items)
	}

	// The hub's checks, with the file: a profile the hub refuses, and one
	// naming only a provider the file lacks.
	createProfile(t, "beta-insecure", betaCluster(func(c *clientcmdv1.Cluster) { c.CertificateAuthorityData, c.InsecureSkipTLSVerify = nil, true }))
	other := writeProviderFile(t, "other-tokens", tokens, nil)
	for _, tc := range []struct {
		file, cluster, want string
	}{
		{file, "beta-insecure", `error: cluster "beta-insecure": ClusterProfile widgethub-system/beta-insecure refused: access provider "widgethub-tokens": ` +
			"unsafe kubeconfig: the cluster's insecure-skip-tls-verify (allowed only with --allow-insecure-members) is not allowed"},
		{other, "beta", `error: cluster "beta": ClusterProfile widgethub-system/beta refused: no access provider: the ClusterProfile names the access providers ["widgethub-tokens"], ` +
			`none of which the access provider file has (it has ["other-tokens"]; see --clusterprofile-provider-file)`},
	} {
		r := run(t, "widgets", "-A", "--cluster", tc.cluster, "--clusterprofile-provider-file", tc.file)
		noToken("widgets --cluster "+tc.cluster, r)
		if r.code != 3 || !strings.Contains(r.stderr, tc.want) || len(rows(r.stdout)) > 1 {
			t.Errorf("widgets --cluster %s: want exit 3, nothing listed and %q, got %s", tc.cluster, tc.want, r)
		}
	}

	// The credential plugin fails: here it has no token for beta.
	r = run(t, "widgets", "-A", "--cluster", "beta", "--clusterprofile-provider-file", writeProviderFile(t, accessProviderName, t.TempDir(), nil))
	if want := `error: cluster "beta": ClusterProfile widgethub-system/beta: the credential plugin failed: getting credentials: exec: executable ` +
		built(t, "cmd/widgethub-credential") + " failed with exit code 1"; r.code != 3 || !strings.Contains(r.stderr, want) {
		t.Errorf("widgets with a failing credential plugin: want exit 3 and %q, got %s", want, r)
	}

	// A file the hub refuses is refused before any request.
	appending := writeProviderFile(t, accessProviderName, tokens, map[string]any{"profileSourcedCLIArgsPolicy": "Append"})
	r = run(t, "widgets", "-A", "--clusterprofile-provider-file", appending, "--kubeconfig", filepath.Join(t.TempDir(), "absent"))
	if r.code != 3 || !strings.Contains(r.stderr, `profileSourcedCLIArgsPolicy "Append" would let a ClusterProfile add arguments to its command`) {
		t.Errorf("widgets with a provider file allowing profile arguments: want exit 3 and the policy named, got %s", r)
	}
}

// The hub's MemberClusters of ClusterProfiles are in the ClusterProfile
// namespace, which --clusterprofile-namespace names as the hub's flag does.
func TestClusterProfileNamespace(t *testing.T) {
	ensureNamespace(t, testFleet.Hub, "inventory")
	mc := profileMemberCluster("elsewhere", engaged(1))
	mc.Namespace = "inventory"
	createMemberCluster(t, mc)
	for _, tc := range []struct {
		args   []string
		listed bool
	}{
		{[]string{"clusters"}, false},
		{[]string{"clusters", "--clusterprofile-namespace", "inventory"}, true},
	} {
		r := mustRun(t, tc.args...)
		if listed := strings.Contains(r.stdout, "elsewhere"); listed != tc.listed {
			t.Errorf("kubectl widgethub %s lists the member of inventory/elsewhere: %v, want %v\n%s", strings.Join(tc.args, " "), listed, tc.listed, r.stdout)
		}
	}
}
