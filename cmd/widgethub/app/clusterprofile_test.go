package app_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

// The ClusterProfile tests run a manager of their own, with its own
// registration namespace (so the suite's manager never sees its objects)
// and an access provider file whose provider runs the real
// widgethub-credential binary, built for the test.
const (
	profileNS       = "widgethub-profiles"
	profileProvider = "widgethub-tokens"
	execExtension   = "client.authentication.k8s.io/exec"
)

var (
	profileSetup     sync.Once
	profileSetupErr  error
	credentialPlugin string
	// profileManager is the widgethub binary the tests run.
	profileManager string
	// profileClient is a direct client of the hub whose scheme knows ClusterProfiles.
	profileClient client.Client
	// profiledMembers are members that only these tests register: the
	// suite's manager serves alpha and beta, so a Widget there is reconciled
	// whatever the ClusterProfile manager does.
	profiledMembers     [2]*fleet.ControlPlane
	profiledMembersOnce sync.Once
	profiledMembersErr  error
)

// profiled returns the two members only the ClusterProfile tests register,
// starting them the first time.
func profiled(t *testing.T) (a, b *fleet.ControlPlane) {
	t.Helper()
	profiledMembersOnce.Do(func() {
		var planes []*fleet.ControlPlane
		if planes, profiledMembersErr = testFleet.AddMembers("profiled-a", "profiled-b"); profiledMembersErr == nil {
			copy(profiledMembers[:], planes)
			for _, p := range planes {
				credentials.addKubeconfig(p.Kubeconfig)
			}
		}
	})
	if profiledMembersErr != nil {
		t.Fatalf("start the ClusterProfile tests' members: %v", profiledMembersErr)
	}
	return profiledMembers[0], profiledMembers[1]
}

// setUpProfiles installs the ClusterProfile CRD of cluster-inventory-api (from
// the module cache) on the hub and builds widgethub-credential, once.
func setUpProfiles(t *testing.T) {
	t.Helper()
	profileSetup.Do(func() {
		scheme := clusters.NewScheme()
		if profileSetupErr = inventoryv1alpha1.AddToScheme(scheme); profileSetupErr != nil {
			return
		}
		if profileClient, profileSetupErr = client.New(testFleet.Hub.Config, client.Options{Scheme: scheme}); profileSetupErr != nil {
			return
		}
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
		if err != nil {
			profileSetupErr = err
			return
		}
		crd := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "multicluster.x-k8s.io_clusterprofiles.yaml")
		if _, err := envtest.InstallCRDs(testFleet.Hub.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
			profileSetupErr = err
			return
		}
		dir, err := os.MkdirTemp("", "widgethub-credential-")
		if err != nil {
			profileSetupErr = err
			return
		}
		credentialPlugin = filepath.Join(dir, "widgethub-credential")
		if out, err := exec.Command("go", "build", "-o", credentialPlugin, "github.com/widgethub/widgethub/cmd/widgethub-credential").CombinedOutput(); err != nil {
			profileSetupErr = &buildError{out: string(out), err: err}
			return
		}
		if profileManager, profileSetupErr = fleet.BuildManager(dir); profileSetupErr != nil {
			return
		}
		profileSetupErr = fleet.EnsureNamespace(context.Background(), profileClient, profileNS)
	})
	if profileSetupErr != nil {
		t.Fatal(profileSetupErr)
	}
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// profileHub is a manager process that takes registrations from
// ClusterProfiles (and Secrets) in profileNS, the token directory of its
// access provider, and the address of its (plain HTTP) metrics.
type profileHub struct {
	tokens, metrics string
}

// startProfileHub writes an access provider file and starts a manager
// process with it (the suite's manager runs in this process), killed when t
// ends.
func startProfileHub(t *testing.T) *profileHub {
	t.Helper()
	setUpProfiles(t)
	dir := t.TempDir()
	h := &profileHub{tokens: filepath.Join(dir, "tokens")}
	file := filepath.Join(dir, "providers.json")
	providers := map[string]any{"providers": []any{map[string]any{
		"name": profileProvider,
		"execConfig": map[string]any{
			"apiVersion":         "client.authentication.k8s.io/v1",
			"command":            credentialPlugin,
			"args":               []string{"--token-dir=" + h.tokens},
			"provideClusterInfo": true,
		},
	}}}
	data, _ := json.Marshal(providers)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	if err := os.WriteFile(hubKubeconfig, testFleet.Hub.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	addr, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	h.metrics = addr
	startManagerProcess(t, profileManager, dir, "profiles", []string{"--kubeconfig=" + hubKubeconfig,
		"--registration-namespace=" + profileNS, "--clusterprofile-provider-file=" + file, "--leader-elect=false",
		"--metrics-bind-address=" + addr, "--metrics-secure=false", "--health-probe-bind-address=0", "--member-sync-timeout=10s"})
	return h
}

// grant puts a token of member, allowed what widgethub needs there, into the
// token directory under name, bound to member's server.
func (h *profileHub) grant(t *testing.T, name string, member *fleet.ControlPlane) {
	t.Helper()
	installMemberRole(t, member)
	token := serviceAccountToken(t, member, "widgethub", "widgethub-member")
	if err := os.MkdirAll(filepath.Join(h.tokens, name), 0o700); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string]string{"token": token, "server": member.Config.Host} {
		if err := os.WriteFile(filepath.Join(h.tokens, name, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// accessProvider is member's access provider entry called provider, whose
// exec extension names the member name.
func accessProvider(provider, name string, member *fleet.ControlPlane) inventoryv1alpha1.AccessProvider {
	ext, _ := json.Marshal(map[string]string{"member": name})
	return inventoryv1alpha1.AccessProvider{Name: provider, Cluster: clientcmdv1.Cluster{
		Server:                   member.Config.Host,
		CertificateAuthorityData: member.Config.CAData,
		Extensions:               []clientcmdv1.NamedExtension{{Name: execExtension, Extension: runtime.RawExtension{Raw: ext}}},
	}}
}

// createProfile creates the ClusterProfile name in profileNS with the access
// providers of its status, deleted when t ends.
func createProfile(t *testing.T, name string, providers ...inventoryv1alpha1.AccessProvider) {
	t.Helper()
	ctx := context.Background()
	profile := &inventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: profileNS, Name: name},
		Spec:       inventoryv1alpha1.ClusterProfileSpec{ClusterManager: inventoryv1alpha1.ClusterManager{Name: "test"}},
	}
	if err := profileClient.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteProfile(t, name) })
	profile.Status = inventoryv1alpha1.ClusterProfileStatus{Conditions: []metav1.Condition{}, AccessProviders: providers}
	if err := profileClient.Status().Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
}

func deleteProfile(t *testing.T, name string) {
	t.Helper()
	profile := &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: profileNS, Name: name}}
	if err := profileClient.Delete(context.Background(), profile); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// expectProfileMember waits until the MemberCluster name of profileNS is
// controlled by a kind object and its Ready condition has status and reason.
func expectProfileMember(t *testing.T, name, kind string, status metav1.ConditionStatus, reason string) *v1alpha1.MemberCluster {
	t.Helper()
	mc := &v1alpha1.MemberCluster{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(profileClient.Get(context.Background(), types.NamespacedName{Namespace: profileNS, Name: name}, mc)).To(Succeed())
		owner := metav1.GetControllerOf(mc)
		g.Expect(owner).NotTo(BeNil())
		g.Expect(owner.Kind).To(Equal(kind))
		ready := readyConditionOf(mc)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason), "message: %s", ready.Message)
	}, eventually, poll).Should(Succeed(), "MemberCluster %s/%s", profileNS, name)
	return mc
}

// profileEvents lists the hub's Events about the ClusterProfile name.
func profileEvents(g Gomega, name string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(profileClient.List(context.Background(), list, client.InNamespace(profileNS))).To(Succeed())
	var events []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "ClusterProfile" && e.Regarding.Name == name {
			events = append(events, e)
		}
	}
	return events
}

func expectProfileEvent(t *testing.T, name, reason string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(profileEvents(g, name)).To(ContainElement(HaveField("Reason", reason)))
	}, eventually, poll).Should(Succeed(), "an Event %s on ClusterProfile %s", reason, name)
}

func TestClusterProfileRegistersAMemberThroughItsAccessProvider(t *testing.T) {
	g := NewWithT(t)
	h := startProfileHub(t)
	alpha, _ := profiled(t)
	h.grant(t, "cp-alpha", alpha)
	createProfile(t, "cp-alpha", accessProvider(profileProvider, "cp-alpha", alpha))

	mc := expectProfileMember(t, "cp-alpha", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Expect(readyConditionOf(mc).Message).To(ContainSubstring(profileProvider))
	g.Expect(mc.Status.KubernetesVersion).NotTo(BeEmpty())

	// Its Widgets are reconciled through the shared queue, as a Secret's are.
	key := createShopWidget(t, alpha, "profiled", 2)
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To[int32](2)))
	}, eventually, poll).Should(Succeed())
	setAvailable(t, alpha, key, 2)
	expectWidgetStatus(t, alpha, key, 2, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, "")
	g.Eventually(func(g Gomega) {
		ready, ok := scrapeMetrics(g, h.metrics).value("widgethub_member_ready", "cluster", "cp-alpha")
		g.Expect(ok && ready == 1).To(BeTrue(), "widgethub_member_ready{cluster=cp-alpha} is 1")
	}, eventually, poll).Should(Succeed())

	// Deleting the ClusterProfile disengages the member and leaves nothing.
	deleteProfile(t, "cp-alpha")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(profileClient.Get(context.Background(), types.NamespacedName{Namespace: profileNS, Name: "cp-alpha"}, &v1alpha1.MemberCluster{}))
	}, eventually, poll).Should(BeTrue(), "the MemberCluster of a deleted ClusterProfile")
	g.Eventually(func(g Gomega) {
		var left []string
		for _, s := range scrapeMetrics(g, h.metrics).series {
			if s.labels["cluster"] == "cp-alpha" {
				left = append(left, s.name)
			}
		}
		g.Expect(left).To(BeEmpty())
	}, eventually, poll).Should(Succeed(), "metric series of a deleted ClusterProfile's member")
	w := widget(g, alpha, key)
	w.Spec.Replicas = ptr.To[int32](5)
	g.Expect(alpha.Client.Update(context.Background(), w)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To[int32](2)))
	}, quietFor, poll).Should(Succeed(), "a change in the member of a deleted ClusterProfile was reconciled")
}

func TestClusterProfileWithoutAConfiguredAccessProviderIsReported(t *testing.T) {
	h := startProfileHub(t)
	beta := testFleet.Member("beta")
	h.grant(t, "cp-unknown", beta)
	createProfile(t, "cp-unknown", accessProvider("someone-elses-provider", "cp-unknown", beta))

	mc := expectProfileMember(t, "cp-unknown", "ClusterProfile", metav1.ConditionFalse, v1alpha1.MemberNoAccessProviderReason)
	g := NewWithT(t)
	g.Expect(readyConditionOf(mc).Message).To(And(ContainSubstring("someone-elses-provider"), ContainSubstring(profileProvider)))
	stalled := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	expectProfileEvent(t, "cp-unknown", v1alpha1.MemberNoAccessProviderReason)
}

func TestSecretKeepsAMemberNameAClusterProfileClaimsToo(t *testing.T) {
	g := NewWithT(t)
	h := startProfileHub(t)
	alpha, beta := profiled(t)
	h.grant(t, "cp-shared", alpha)
	createProfile(t, "cp-shared", accessProvider(profileProvider, "cp-shared", alpha))
	expectProfileMember(t, "cp-shared", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	// A Secret registers the same name (for beta): it takes the name.
	secret := registration.NewSecret(profileNS, "cp-shared", beta.Kubeconfig)
	g.Expect(profileClient.Create(context.Background(), secret)).To(Succeed())
	t.Cleanup(func() { _ = profileClient.Delete(context.Background(), secret) })
	mc := expectProfileMember(t, "cp-shared", "Secret", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Eventually(func(g Gomega) {
		g.Expect(profileClient.Get(context.Background(), client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		conflict := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberNameConflict)
		g.Expect(conflict).NotTo(BeNil())
		g.Expect(conflict.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(conflict.Message).To(ContainSubstring("ClusterProfile " + profileNS + "/cp-shared"))
	}, eventually, poll).Should(Succeed())
	expectProfileEvent(t, "cp-shared", v1alpha1.MemberNameConflictReason)

	// The member is the Secret's: beta's Widgets are reconciled, alpha's not.
	key := createShopWidget(t, beta, "shared-beta", 1)
	g.Eventually(func(g Gomega) { deployment(g, beta, key) }, eventually, poll).Should(Succeed())
	onAlpha := createShopWidget(t, alpha, "shared-alpha", 1)
	g.Consistently(func() bool {
		return apierrors.IsNotFound(alpha.Client.Get(context.Background(), onAlpha, &appsv1.Deployment{}))
	}, quietFor, poll).Should(BeTrue(), "the ClusterProfile's member was served while the Secret held its name")

	// The Secret goes: the ClusterProfile takes the name, and the conflict is over.
	g.Expect(profileClient.Delete(context.Background(), secret)).To(Succeed())
	mc = expectProfileMember(t, "cp-shared", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Expect(meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberNameConflict)).To(BeNil())
	g.Eventually(func(g Gomega) { deployment(g, alpha, onAlpha) }, eventually, poll).Should(Succeed())
}

func TestClusterProfileCannotMakeTheHubReadAFileOrRunACommand(t *testing.T) {
	g := NewWithT(t)
	h := startProfileHub(t)
	gamma := testFleet.Member("gamma")
	h.grant(t, "cp-args", gamma)

	// Environment from the profile's extensions does not reach the command
	// (the CRD allows objects only as extensions, so no argument list; see
	// providers/clusterprofile's tests for both): the member is engaged
	// with the administrator's plugin as configured.
	envs, _ := json.Marshal(map[string]string{"LD_PRELOAD": "/nonexistent.so"})
	extended := accessProvider(profileProvider, "cp-args", gamma)
	extended.Cluster.Extensions = append(extended.Cluster.Extensions,
		clientcmdv1.NamedExtension{Name: "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs", Extension: runtime.RawExtension{Raw: envs}})
	createProfile(t, "cp-args", extended)
	expectProfileMember(t, "cp-args", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	// Files, proxies and plain http are refused before anything is run or sent.
	for name, edit := range map[string]func(c *clientcmdv1.Cluster){
		"cp-ca-file": func(c *clientcmdv1.Cluster) {
			c.CertificateAuthorityData, c.CertificateAuthority = nil, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
		},
		"cp-proxy": func(c *clientcmdv1.Cluster) { c.ProxyURL = "http://127.0.0.1:1" },
		"cp-http":  func(c *clientcmdv1.Cluster) { c.Server = strings.Replace(c.Server, "https://", "http://", 1) },
		"cp-skip":  func(c *clientcmdv1.Cluster) { c.InsecureSkipTLSVerify = true },
	} {
		h.grant(t, name, gamma)
		p := accessProvider(profileProvider, name, gamma)
		edit(&p.Cluster)
		createProfile(t, name, p)
		expectProfileMember(t, name, "ClusterProfile", metav1.ConditionFalse, v1alpha1.MemberUnsafeKubeconfigReason)
	}

	// A profile that names another member's token for its own server gets
	// nothing: the plugin binds each token to its member's server.
	p := accessProvider(profileProvider, "cp-args", testFleet.Member("beta"))
	createProfile(t, "cp-borrower", p)
	g.Consistently(func(g Gomega) {
		mc := &v1alpha1.MemberCluster{}
		err := profileClient.Get(context.Background(), types.NamespacedName{Namespace: profileNS, Name: "cp-borrower"}, mc)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		if ready := readyConditionOf(mc); ready != nil {
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		}
	}, 3*time.Second, poll).Should(Succeed())
}
