package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// The ClusterProfile tests run a manager of their own, with its own
// registration namespace (so the suite's manager never sees its objects)
// and an access provider file whose provider runs the real
// widgethub-credential binary, built for the test.
const (
	profileNS       = "widgethub-profiles"
	profileProvider = "widgethub-tokens"
)

var (
	profileSetup    sync.Once
	profileSetupErr error
	// profileManager is the widgethub binary the tests run.
	profileManager string
	// profileClient is a direct client of the hub whose scheme knows ClusterProfiles.
	profileClient client.Client
	// profiledMembers are members that only these tests register: the
	// suite's manager serves alpha and beta, so a Widget there is reconciled
	// whatever the ClusterProfile manager does.
	profiledMembers = &hubtest.LateMembers{Names: []string{"profiled-a", "profiled-b"}}
)

// profiled returns the two members only the ClusterProfile tests register,
// starting them the first time.
func profiled(t *testing.T) (a, b *fleet.ControlPlane) {
	t.Helper()
	return profiledMembers.Get(t, "profiled-a"), profiledMembers.Get(t, "profiled-b")
}

// setUpProfiles installs the ClusterProfile CRD on the hub, once.
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
		if profileSetupErr = testFleet.Hub.InstallClusterProfileCRD(); profileSetupErr != nil {
			return
		}
		if profileManager, profileSetupErr = fleet.ManagerBinary(); profileSetupErr != nil {
			return
		}
		profileSetupErr = fleet.EnsureNamespace(context.Background(), profileClient, profileNS)
	})
	if profileSetupErr != nil {
		t.Fatal(profileSetupErr)
	}
}

// profileHub is a manager process that takes registrations from
// ClusterProfiles (and Secrets) in profileNS, the token directory of its
// access provider, the address of its (plain HTTP) metrics, and the file
// where its access provider's command records each run (pluginRuns).
type profileHub struct {
	access        *fleet.AccessProvider
	metrics, runs string
}

// startProfileHub writes an access provider file and starts a manager
// process with it (the suite's manager runs in this process), killed when t
// ends.
func startProfileHub(t *testing.T) *profileHub {
	t.Helper()
	setUpProfiles(t)
	dir := t.TempDir()
	access, err := fleet.NewAccessProvider(dir, profileProvider)
	if err != nil {
		t.Fatal(err)
	}
	h := &profileHub{access: access, runs: filepath.Join(dir, "runs")}
	// The provider's command records what it is run for (the ExecCredential
	// client-go hands it) in a file of its own, then runs
	// widgethub-credential. Shell builtins only: the hub may give it no PATH.
	if err := os.Mkdir(h.runs, 0o700); err != nil {
		t.Fatal(err)
	}
	wrapper := hubtest.WriteFile(t, dir, "credential.sh", fmt.Appendf(nil, "#!/bin/sh\nprintf '%%s' \"$KUBERNETES_EXEC_INFO\" >%s/$$\nexec %s \"$@\"\n", h.runs, access.Plugin))
	if err := os.Chmod(wrapper, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := access.Runs(wrapper); err != nil {
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
		"--registration-namespace=" + profileNS, "--clusterprofile-provider-file=" + access.File, "--leader-elect=false",
		"--metrics-bind-address=" + addr, "--metrics-secure=false", "--health-probe-bind-address=0", "--member-sync-timeout=10s"})
	return h
}

// grant puts a token of member, allowed what widgethub needs there, into the
// token directory under name, bound to member's server.
func (h *profileHub) grant(t *testing.T, name string, member *fleet.ControlPlane) {
	t.Helper()
	h.grantAt(t, name, member, member.Config.Host)
}

// grantAt is grant with the token bound to server instead: the plugin
// hands member's token to whoever asks for server.
func (h *profileHub) grantAt(t *testing.T, name string, member *fleet.ControlPlane, server string) {
	t.Helper()
	hubtest.InstallMemberRole(t, member)
	token := hubtest.ServiceAccountToken(t, member, "widgethub", "widgethub-member")
	fleet.HandOver(token) // the plugin hands it to the manager process
	if err := h.access.Grant(name, server, token); err != nil {
		t.Fatal(err)
	}
}

// pluginRun is one run of the access provider's command: the server it was
// asked a token for and the member the cluster's exec extension names.
type pluginRun struct{ server, member string }

// pluginRuns are the runs of the access provider's command so far.
func (h *profileHub) pluginRuns(g Gomega) []pluginRun {
	files, err := os.ReadDir(h.runs)
	g.Expect(err).NotTo(HaveOccurred())
	var runs []pluginRun
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(h.runs, f.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		var info struct {
			Spec struct {
				Cluster struct {
					Server string `json:"server"`
					Config struct {
						Member string `json:"member"`
					} `json:"config"`
				} `json:"cluster"`
			} `json:"spec"`
		}
		g.Expect(json.Unmarshal(data, &info)).To(Succeed(), "the ExecCredential of run %s: %q", f.Name(), data)
		runs = append(runs, pluginRun{server: info.Spec.Cluster.Server, member: info.Spec.Cluster.Config.Member})
	}
	return runs
}

// entry is the access provider entry called provider of a ClusterProfile
// that reaches member as the member called name.
func entry(provider, name string, member *fleet.ControlPlane) inventoryv1alpha1.AccessProvider {
	return fleet.ProfileEntry(provider, name, member.Config.Host, member.Config.CAData)
}

// createProfile creates the ClusterProfile name in profileNS with the access
// providers of its status, deleted when t ends.
func createProfile(t *testing.T, name string, providers ...inventoryv1alpha1.AccessProvider) {
	t.Helper()
	t.Cleanup(func() { deleteProfile(t, name) })
	if err := fleet.CreateClusterProfile(context.Background(), profileClient, profileNS, name, providers...); err != nil {
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
		ready := hubtest.ReadyConditionOf(mc)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason), "message: %s", ready.Message)
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "MemberCluster %s/%s", profileNS, name)
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
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "an Event %s on ClusterProfile %s", reason, name)
}

func TestClusterProfileRegistersAMemberThroughItsAccessProvider(t *testing.T) {
	g := NewWithT(t)
	h := startProfileHub(t)
	alpha, _ := profiled(t)
	h.grant(t, "cp-alpha", alpha)
	createProfile(t, "cp-alpha", entry(profileProvider, "cp-alpha", alpha))

	mc := expectProfileMember(t, "cp-alpha", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Expect(hubtest.ReadyConditionOf(mc).Message).To(ContainSubstring(profileProvider))
	g.Expect(mc.Status.KubernetesVersion).NotTo(BeEmpty())

	// Its Widgets are reconciled through the shared queue, as a Secret's are.
	key := hubtest.CreateShopWidget(t, alpha, "profiled", 2)
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To[int32](2)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	hubtest.SetAvailable(t, alpha, key, 2)
	hubtest.ExpectWidgetStatus(t, alpha, key, 2, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, "")
	g.Eventually(func(g Gomega) {
		ready, ok := scrapeMetrics(g, h.metrics).value("widgethub_member_ready", "cluster", "cp-alpha")
		g.Expect(ok && ready == 1).To(BeTrue(), "widgethub_member_ready{cluster=cp-alpha} is 1")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// Deleting the ClusterProfile disengages the member and leaves nothing.
	deleteProfile(t, "cp-alpha")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(profileClient.Get(context.Background(), types.NamespacedName{Namespace: profileNS, Name: "cp-alpha"}, &v1alpha1.MemberCluster{}))
	}, hubtest.Within, hubtest.Poll).Should(BeTrue(), "the MemberCluster of a deleted ClusterProfile")
	g.Eventually(func(g Gomega) {
		var left []string
		for _, s := range scrapeMetrics(g, h.metrics).series {
			if s.labels["cluster"] == "cp-alpha" {
				left = append(left, s.name)
			}
		}
		g.Expect(left).To(BeEmpty())
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "metric series of a deleted ClusterProfile's member")
	w := hubtest.Widget(g, alpha, key)
	w.Spec.Replicas = ptr.To[int32](5)
	g.Expect(alpha.Client.Update(context.Background(), w)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To[int32](2)))
	}, hubtest.QuietFor, hubtest.Poll).Should(Succeed(), "a change in the member of a deleted ClusterProfile was reconciled")
}

func TestClusterProfileWithoutAConfiguredAccessProviderIsReported(t *testing.T) {
	h := startProfileHub(t)
	beta := testFleet.Member("beta")
	h.grant(t, "cp-unknown", beta)
	createProfile(t, "cp-unknown", entry("someone-elses-provider", "cp-unknown", beta))

	mc := expectProfileMember(t, "cp-unknown", "ClusterProfile", metav1.ConditionFalse, v1alpha1.MemberNoAccessProviderReason)
	g := NewWithT(t)
	g.Expect(hubtest.ReadyConditionOf(mc).Message).To(And(ContainSubstring("someone-elses-provider"), ContainSubstring(profileProvider)))
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
	createProfile(t, "cp-shared", entry(profileProvider, "cp-shared", alpha))
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
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	expectProfileEvent(t, "cp-shared", v1alpha1.MemberNameConflictReason)

	// The member is the Secret's: beta's Widgets are reconciled, alpha's not.
	key := hubtest.CreateShopWidget(t, beta, "shared-beta", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, beta, key) }, hubtest.Within, hubtest.Poll).Should(Succeed())
	onAlpha := hubtest.CreateShopWidget(t, alpha, "shared-alpha", 1)
	g.Consistently(func() bool {
		return apierrors.IsNotFound(alpha.Client.Get(context.Background(), onAlpha, &appsv1.Deployment{}))
	}, hubtest.QuietFor, hubtest.Poll).Should(BeTrue(), "the ClusterProfile's member was served while the Secret held its name")

	// The Secret goes: the ClusterProfile takes the name, and the conflict is over.
	g.Expect(profileClient.Delete(context.Background(), secret)).To(Succeed())
	mc = expectProfileMember(t, "cp-shared", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Expect(meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberNameConflict)).To(BeNil())
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, alpha, onAlpha) }, hubtest.Within, hubtest.Poll).Should(Succeed())
}

func TestClusterProfileCannotMakeTheHubReadAFileOrRunACommand(t *testing.T) {
	g := NewWithT(t)
	h := startProfileHub(t)
	gamma := testFleet.Member("gamma")
	h.grant(t, "cp-args", gamma)

	// Environment from the profile's extensions does not reach the command
	// (the CRD allows objects only as extensions, so no argument list; see
	// providers/clusterprofile's tests for both): the member is engaged
	// with the administrator's plugin as configured, which ran without the
	// profile's LD_PRELOAD, a real library that marks any program it is
	// loaded into.
	preload, loaded := preloadMarker(t)
	envs, _ := json.Marshal(map[string]string{"LD_PRELOAD": preload})
	extended := entry(profileProvider, "cp-args", gamma)
	extended.Cluster.Extensions = append(extended.Cluster.Extensions,
		clientcmdv1.NamedExtension{Name: "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs", Extension: runtime.RawExtension{Raw: envs}})
	createProfile(t, "cp-args", extended)
	expectProfileMember(t, "cp-args", "ClusterProfile", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Expect(h.pluginRuns(g)).To(ContainElement(pluginRun{server: gamma.Config.Host, member: "cp-args"}), "the access provider's command ran for cp-args")
	if _, err := os.Stat(loaded); !os.IsNotExist(err) {
		t.Errorf("the profile's LD_PRELOAD was loaded into the access provider's command (%v)", err)
	}

	// Files, proxies and plain http are refused before anything is run or
	// sent: the server each names is a hubtest.Recorder for which the plugin would
	// hand out a token, and no plugin run names them (checked at the end).
	server, plain, proxy := hubtest.NewRecorder(t, true), hubtest.NewRecorder(t, false), hubtest.NewRecorder(t, false)
	refused := map[string]func(c *clientcmdv1.Cluster){
		"cp-ca-file": func(c *clientcmdv1.Cluster) {
			c.CertificateAuthorityData, c.CertificateAuthority = nil, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
		},
		"cp-proxy": func(c *clientcmdv1.Cluster) { c.ProxyURL = proxy.URL },
		"cp-http":  func(c *clientcmdv1.Cluster) { c.Server = plain.URL },
		"cp-skip":  func(c *clientcmdv1.Cluster) { c.InsecureSkipTLSVerify = true },
	}
	for name, edit := range refused {
		p := entry(profileProvider, name, gamma)
		p.Cluster.Server, p.Cluster.CertificateAuthorityData = server.URL, server.CAPEM()
		edit(&p.Cluster)
		h.grantAt(t, name, gamma, p.Cluster.Server)
		createProfile(t, name, p)
		expectProfileMember(t, name, "ClusterProfile", metav1.ConditionFalse, v1alpha1.MemberUnsafeKubeconfigReason)
	}

	// A profile that names another member's token for a server of its own
	// gets nothing: the plugin binds each token to its member's server.
	// Once the hub has run the plugin for it and reported it, it stays not
	// Ready and its server hears nothing.
	borrower := hubtest.NewRecorder(t, true)
	p := entry(profileProvider, "cp-args", gamma)
	p.Cluster.Server, p.Cluster.CertificateAuthorityData = borrower.URL, borrower.CAPEM()
	createProfile(t, "cp-borrower", p)
	g.Eventually(func(g Gomega) {
		g.Expect(h.pluginRuns(g)).To(ContainElement(pluginRun{server: borrower.URL, member: "cp-args"}))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "the access provider's command run for the borrower's server")
	mc := expectProfileMember(t, "cp-borrower", "ClusterProfile", metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	t.Logf("the borrower: %s", hubtest.ReadyConditionOf(mc).Message)
	g.Consistently(func(g Gomega) {
		g.Expect(profileClient.Get(context.Background(), client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		g.Expect(hubtest.ReadyConditionOf(mc).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(borrower.Conns.Load()).To(BeZero(), "connections to the borrower's server")
	}, 3*time.Second, hubtest.Poll).Should(Succeed())

	for _, run := range h.pluginRuns(g) {
		if _, ok := refused[run.member]; ok {
			t.Errorf("the access provider's command ran for the refused profile %s (server %s)", run.member, run.server)
		}
	}
	for what, r := range map[string]*hubtest.Recorder{"server": server, "plain-http server": plain, "proxy": proxy} {
		if c, n := r.Conns.Load(), r.Requests.Load(); c != 0 || n != 0 {
			t.Errorf("the %s named by refused profiles got %d connections and %d requests, want none", what, c, n)
		}
	}
}

// preloadMarker builds a shared object that creates the file marker in any
// program it is loaded into, and checks that it does in /bin/sh: the
// LD_PRELOAD a profile names is a real one, which the loader would not skip.
func preloadMarker(t *testing.T) (so, marker string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "loaded")
	src := hubtest.WriteFile(t, dir, "marker.c", fmt.Appendf(nil, "#include <fcntl.h>\n#include <unistd.h>\n"+
		"__attribute__((constructor)) static void mark(void) { close(open(%q, O_CREAT | O_WRONLY, 0600)); }\n", marker))
	so = filepath.Join(dir, "marker.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
		t.Fatalf("build the preload: %v\n%s", err, out)
	}
	sh := exec.Command("/bin/sh", "-c", ":")
	sh.Env = append(os.Environ(), "LD_PRELOAD="+so)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("/bin/sh with the preload: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the preload left no mark in /bin/sh: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	return so, marker
}
