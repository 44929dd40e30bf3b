package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// createWidget creates a Widget in cp and, when ready, gives it a Ready status.
func createWidget(t *testing.T, cp *fleet.ControlPlane, ns, name string, replicas int32, ready bool) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cp, ns)
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.WidgetSpec{Replicas: ptr.To(replicas)}}
	if err := cp.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, w) })
	if !ready {
		return
	}
	w.Status.AvailableReplicas = replicas
	w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.WidgetReady, Status: metav1.ConditionTrue, Reason: v1alpha1.WidgetAvailableReason, LastTransitionTime: metav1.Now()}}
	if err := cp.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
}

// rows returns the table's lines split into cells.
func rows(table string) [][]string {
	var out [][]string
	for line := range strings.Lines(table) {
		out = append(out, strings.Fields(line))
	}
	return out
}

func TestWidgetsAcrossMembers(t *testing.T) {
	joinAlphaAndBeta(t)
	createWidget(t, testFleet.Member("alpha"), "shop", "cart", 2, true)
	createWidget(t, testFleet.Member("alpha"), "default", "web", 1, false)
	createWidget(t, testFleet.Member("beta"), "shop", "cart", 3, false)

	r := mustRun(t, "widgets", "-A")
	got := rows(r.stdout)
	want := [][]string{
		{"CLUSTER", "NAMESPACE", "NAME", "REPLICAS", "AVAILABLE", "READY", "AGE"},
		{"alpha", "default", "web", "1", "0", "Unknown"},
		{"alpha", "shop", "cart", "2", "2", "True"},
		{"beta", "shop", "cart", "3", "0", "Unknown"},
	}
	if len(got) != len(want) {
		t.Fatalf("widgets -A printed %d lines, want %d:\n%s", len(got), len(want), r.stdout)
	}
	for i := range want {
		n := len(want[i])
		if strings.Join(got[i][:min(n, len(got[i]))], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d = %q, want %q...", i, got[i], want[i])
		}
	}

	r = mustRun(t, "widgets", "-n", "shop", "--cluster", "beta")
	if got := rows(r.stdout); len(got) != 2 || got[0][0] != "CLUSTER" || got[0][1] != "NAME" || strings.Join(got[1][:4], " ") != "beta cart 3 0" {
		t.Errorf("widgets -n shop --cluster beta:\n%s", r.stdout)
	}
	r = mustRun(t, "widgets", "-n", "nothing-here")
	if r.stdout != "" || !strings.Contains(r.stderr, "No Widgets found in namespace nothing-here of 2 member(s)") {
		t.Errorf("widgets in an empty namespace: %s", r)
	}
}

// TestWidgetsRefusesUnsafeRegistrations registers, next to alpha and beta,
// copies of alpha's registration that work only if the plugin reads a file
// the kubeconfig names or skips TLS verification: widgets must refuse them
// without a request and without quoting them, and still list the others.
func TestWidgetsRefusesUnsafeRegistrations(t *testing.T) {
	joinAlphaAndBeta(t)
	createWidget(t, testFleet.Member("alpha"), "shop", "cart", 1, false)
	createWidget(t, testFleet.Member("beta"), "shop", "cart", 2, false)

	doc := registrationSecret(t, "alpha").Data[registration.SecretKey]
	tokenFile := filepath.Join(t.TempDir(), "token")
	for name, edit := range map[string]func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo){
		"evil-token-file": func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			// alpha's valid token, read from this machine if the plugin followed tokenFile.
			if err := os.WriteFile(tokenFile, []byte(u.Token), 0o600); err != nil {
				t.Fatal(err)
			}
			u.Token, u.TokenFile = "", tokenFile
		},
		"evil-insecure": func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.InsecureSkipTLSVerify = nil, true
		},
	} {
		hostile, err := fleet.EditKubeconfig(doc, edit)
		if err != nil {
			t.Fatal(err)
		}
		registerForTest(t, name, hostile)
	}

	r := run(t, "widgets", "-n", "shop")
	if r.code != plugin.ExitKubeconfig {
		t.Errorf("widgets with unsafe registrations: exit %d, want %d", r.code, plugin.ExitKubeconfig)
	}
	for _, want := range []string{
		`error: cluster "evil-token-file": registration kubeconfig refused: context "alpha": unsafe kubeconfig: users[].user.tokenFile is not allowed`,
		`error: cluster "evil-insecure": registration kubeconfig refused: context "alpha": unsafe kubeconfig: clusters[].cluster.insecure-skip-tls-verify`,
		"2 of 4 members could not be read",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout+r.stderr, tokenFile) {
		t.Errorf("widgets quoted the tokenFile path:\n%s", r)
	}
	got := rows(r.stdout)
	if len(got) != 3 || strings.Join(got[1][:3], " ") != "alpha cart 1" || strings.Join(got[2][:3], " ") != "beta cart 2" {
		t.Errorf("widgets -n shop printed, want the header, alpha's cart and beta's cart only:\n%s", r.stdout)
	}
}

func TestClustersShowsMemberClusterStatus(t *testing.T) {
	unjoinCleanup(t, "alpha", "alpha")
	unjoinCleanup(t, "beta", "beta")
	alphaJoin := join(t, "alpha", "alpha", "--token-ttl", "2h")
	betaJoin := join(t, "beta", "beta", "--server", "https://beta.example:6443")

	status := engaged(4)
	status.ServedBy = "widgethub-7d4f9-x2k8p"
	createMemberCluster(t, &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "alpha"}, Status: status})

	r := mustRun(t, "clusters")
	got := rows(r.stdout)
	if len(got) != 3 {
		t.Fatalf("clusters printed %d lines, want 3:\n%s", len(got), r.stdout)
	}
	if h := strings.Join(got[0], " "); h != "NAME READY REASON VERSION WIDGETS SERVER TOKEN-EXPIRES SERVED-BY AGE" {
		t.Errorf("header = %q", h)
	}
	// The expiry read from each token is the one the API server gave join.
	for i, j := range []result{alphaJoin, betaJoin} {
		if want := mintedUntil(t, j); got[i+1][6] != want {
			t.Errorf("%s TOKEN-EXPIRES = %q, want %q as join printed", got[i+1][0], got[i+1][6], want)
		}
	}
	if got[1][7] != "widgethub-7d4f9-x2k8p" || got[2][7] != "-" {
		t.Errorf("SERVED-BY = %q and %q, want the replica in alpha's status and - for beta", got[1][7], got[2][7])
	}
	if a := strings.Join(got[1][:5], " "); a != "alpha True Engaged v1.36.3 4" || !strings.HasPrefix(got[1][5], "https://127.0.0.1:") {
		t.Errorf("alpha row = %q", got[1])
	}
	if b := strings.Join(got[2][:6], " "); b != "beta Unknown - - - https://beta.example:6443" {
		t.Errorf("beta row = %q", got[2])
	}
}

func TestKindAddress(t *testing.T) {
	unjoinCleanup(t, "alpha", "alpha")
	join(t, "alpha", "alpha", "--kind")
	if s := serverOfRegistration(t, "alpha"); s != "https://alpha-control-plane:6443" {
		t.Errorf("--kind server = %q", s)
	}
	join(t, "alpha", "alpha", "--kind=fleet-a", "--overwrite")
	if s := serverOfRegistration(t, "alpha"); s != "https://fleet-a-control-plane:6443" {
		t.Errorf("--kind=fleet-a server = %q", s)
	}
	// widgets reads through the registration, which does not resolve from here.
	r := run(t, "widgets", "-A")
	if r.code != plugin.ExitUnreachable || !strings.Contains(r.stderr, `cluster "alpha"`) ||
		!strings.Contains(r.stderr, "cannot reach the API server at https://fleet-a-control-plane:6443") {
		t.Errorf("widgets with an unreachable member: %s", r)
	}
}

func serverOfRegistration(t *testing.T, name string) string {
	t.Helper()
	raw, err := clientcmd.Load(registrationSecret(t, name).Data[registration.SecretKey])
	if err != nil {
		t.Fatal(err)
	}
	return raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster].Server
}

// brokenKubeconfigs are admin kubeconfig files that join must refuse.
type brokenKubeconfigs struct {
	dir string
	// down has a port nothing listens on, insecure skips TLS verification,
	// noCurrent has three contexts and no current one, empty has none.
	down, insecure, noCurrent, empty string
}

func writeBrokenKubeconfigs(t *testing.T) brokenKubeconfigs {
	t.Helper()
	dir := t.TempDir()
	// A copy of alpha's kubeconfig with a port nothing listens on.
	raw, err := clientcmd.LoadFromFile(kubeconfigs.Each["alpha"])
	if err != nil {
		t.Fatal(err)
	}
	raw.Clusters["alpha"].Server = "https://127.0.0.1:1"
	down := filepath.Join(dir, "down.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, down); err != nil {
		t.Fatal(err)
	}
	// One that reaches alpha but skips TLS verification.
	raw.Clusters["alpha"].Server = testFleet.Member("alpha").Config.Host
	raw.Clusters["alpha"].CertificateAuthorityData, raw.Clusters["alpha"].InsecureSkipTLSVerify = nil, true
	insecure := filepath.Join(dir, "insecure.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, insecure); err != nil {
		t.Fatal(err)
	}
	all, err := clientcmd.LoadFromFile(kubeconfigs.All)
	if err != nil {
		t.Fatal(err)
	}
	all.CurrentContext = ""
	noCurrent := filepath.Join(dir, "no-current.kubeconfig")
	if err := clientcmd.WriteToFile(*all, noCurrent); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.kubeconfig")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return brokenKubeconfigs{dir: dir, down: down, insecure: insecure, noCurrent: noCurrent, empty: empty}
}

func TestErrors(t *testing.T) {
	k := writeBrokenKubeconfigs(t)
	unjoinCleanup(t, "alpha", "alpha")
	join(t, "alpha", "alpha")

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"name not a DNS label", []string{"join", "Alpha_1", "--member-context", "alpha"}, plugin.ExitUsage, `invalid cluster name "Alpha_1"`},
		{"name too long", []string{"join", strings.Repeat("a", 64), "--member-context", "alpha"}, plugin.ExitUsage, "invalid cluster name"},
		{"no name", []string{"join", "--member-context", "alpha"}, plugin.ExitUsage, "expected exactly one cluster NAME"},
		{"no member", []string{"join", "gamma"}, plugin.ExitUsage, "pass --member-kubeconfig and/or --member-context"},
		{"server and kind", []string{"join", "gamma", "--member-context", "alpha", "--server", "https://x", "--kind"}, plugin.ExitUsage, "pass one"},
		{"unknown flag", []string{"widgets", "--nope"}, plugin.ExitUsage, "unknown flag: --nope"},
		{"unknown command", []string{"enroll"}, plugin.ExitUsage, `unknown command "enroll"`},
		{"missing member context", []string{"join", "gamma", "--member-context", "nope"}, plugin.ExitKubeconfig,
			`member "gamma": context "nope" not found in kubeconfig ` + kubeconfigs.All + " (contexts: alpha, beta, hub)"},
		{"missing hub context", []string{"clusters", "--context", "nope"}, plugin.ExitKubeconfig, `hub: context "nope" not found`},
		{"missing member kubeconfig", []string{"join", "gamma", "--member-kubeconfig", filepath.Join(k.dir, "absent")}, plugin.ExitKubeconfig, "cannot read kubeconfig"},
		{"no contexts", []string{"join", "gamma", "--member-kubeconfig", k.empty}, plugin.ExitKubeconfig, "no contexts; pass --member-context (contexts: none)"},
		{"no current context", []string{"join", "gamma", "--member-kubeconfig", k.noCurrent}, plugin.ExitKubeconfig,
			"3 contexts and no current-context; pass --member-context (contexts: alpha, beta, hub)"},
		{"unreachable member", []string{"join", "gamma", "--member-kubeconfig", k.down}, plugin.ExitUnreachable,
			`member "gamma": cannot reach the API server at https://127.0.0.1:1`},
		{"insecure member", []string{"join", "gamma", "--member-kubeconfig", k.insecure}, plugin.ExitKubeconfig,
			`member "gamma": the member kubeconfig skips TLS verification (insecure-skip-tls-verify), which the hub refuses`},
		{"unreachable hub", []string{"clusters", "--kubeconfig", k.down, "--context", "alpha"}, plugin.ExitUnreachable, "hub: cannot reach the API server"},
		{"already registered", []string{"join", "alpha", "--member-context", "alpha"}, plugin.ExitExists,
			`"alpha" is already registered on the hub (Secret widgethub-system/alpha); pass --overwrite to replace it`},
		{"no registration namespace", []string{"join", "gamma", "--member-context", "beta", "--registration-namespace", "elsewhere"}, plugin.ExitError,
			`registration namespace "elsewhere" does not exist`},
		{"unjoin unknown", []string{"unjoin", "gamma", "--member-context", "beta"}, plugin.ExitNotFound, `"gamma" is not registered on the hub`},
		{"unjoin without member", []string{"unjoin", "alpha"}, plugin.ExitUsage, "needs the member admin's credentials"},
		{"cleanup without member", []string{"unjoin", "alpha", "--cleanup"}, plugin.ExitUsage, "needs the member admin's credentials"},
		{"cleanup with keep-token", []string{"unjoin", "alpha", "--cleanup", "--keep-token"}, plugin.ExitUsage, "--keep-token does not reach the member"},
		{"widgets of unknown cluster", []string{"widgets", "--cluster", "gamma"}, plugin.ExitNotFound, `"gamma" is not registered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("want exit %d and %q on stderr, got %s", tc.code, tc.msg, r)
			}
			if !regexp.MustCompile(`(?m)^error: `).MatchString(r.stderr) {
				t.Errorf("stderr has no error line: %q", r.stderr)
			}
		})
	}
	// Nothing reached the member in the failed joins of beta.
	if got := bindingsOf(t, testFleet.Member("beta"), subjectOfHub()); len(got) != 0 {
		t.Errorf("a failed join left bindings in beta: %v", got)
	}

	// --overwrite replaces the registration.
	r := mustRun(t, "join", "alpha", "--member-context", "alpha", "--overwrite")
	if !strings.Contains(r.stdout, `re-registered "alpha"`) {
		t.Errorf("join --overwrite output:\n%s", r.stdout)
	}
}
