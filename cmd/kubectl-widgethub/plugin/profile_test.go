package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// accessProviderName is the access provider of the tests' provider files.
const accessProviderName = "widgethub-tokens"

// createProfile creates the ClusterProfile name on the hub, as a fleet
// manager publishes it, with one access provider; it is deleted when t ends.
func createProfile(t *testing.T, name string, provider inventoryv1alpha1.AccessProvider) {
	t.Helper()
	ctx := context.Background()
	if err := fleet.CreateClusterProfile(ctx, testFleet.Hub.Client, hubNS, name, provider); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p := &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: name}}
		_ = testFleet.Hub.Client.Delete(ctx, p)
	})
}

// editProviderFile writes a copy of a's provider file with its one provider
// edited.
func editProviderFile(t *testing.T, a *fleet.AccessProvider, edit func(provider map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(a.File)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Providers []map[string]any `json:"providers"`
	}
	if err := json.Unmarshal(data, &file); err != nil || len(file.Providers) != 1 {
		t.Fatalf("provider file %s: %v", a.File, err)
	}
	edit(file.Providers[0])
	if data, err = json.Marshal(file); err != nil {
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
	cfg, err := connect.RESTConfig(secret.Data[registration.SecretKey], connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := cfg.REST.BearerToken
	access, err := fleet.NewAccessProvider(t.TempDir(), accessProviderName)
	if err != nil {
		t.Fatal(err)
	}
	if err := access.Grant("beta", beta.Config.Host, token); err != nil {
		t.Fatal(err)
	}
	if err := testFleet.Hub.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	createProfile(t, "beta", access.Entry("beta", beta))
	// A profile named like a registration Secret: the member is the Secret's.
	createProfile(t, "alpha", access.Entry("beta", beta))
	file := access.File

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
	insecure := access.Entry("beta", beta)
	insecure.Cluster.CertificateAuthorityData, insecure.Cluster.InsecureSkipTLSVerify = nil, true
	createProfile(t, "beta-insecure", insecure)
	other := editProviderFile(t, access, func(p map[string]any) { p["name"] = "other-tokens" })
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
	noTokens := editProviderFile(t, access, func(p map[string]any) {
		p["execConfig"].(map[string]any)["args"] = []string{"--token-dir=" + t.TempDir()}
	})
	r = run(t, "widgets", "-A", "--cluster", "beta", "--clusterprofile-provider-file", noTokens)
	if want := `error: cluster "beta": ClusterProfile widgethub-system/beta: the credential plugin failed: getting credentials: exec: executable ` +
		access.Plugin + " failed with exit code 1"; r.code != 3 || !strings.Contains(r.stderr, want) {
		t.Errorf("widgets with a failing credential plugin: want exit 3 and %q, got %s", want, r)
	}

	// A file the hub refuses is refused before any request.
	appending := editProviderFile(t, access, func(p map[string]any) { p["profileSourcedCLIArgsPolicy"] = "Append" })
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
