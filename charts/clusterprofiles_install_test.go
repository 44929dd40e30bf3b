package charts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// TestChartRegistersClusterProfilesInAnotherNamespace installs the chart
// with the values of docs/install.md's ClusterProfiles examples into a real
// hub API server whose release namespace enforces the restricted Pod
// Security level, the access provider replaced by a local
// widgethub-credential. Sharded, then leader-elected, it checks that the
// manager's ServiceAccount may do what the hub does with ClusterProfiles in
// their namespace and nothing more there, and runs the manager with the
// installed Deployment's arguments, the installed ConfigMap as its provider
// file and the ServiceAccount's token until the member of a ClusterProfile
// in that namespace is Ready and an Event about the profile is written.
func TestChartRegistersClusterProfilesInAnotherNamespace(t *testing.T) {
	var examples []string
	for _, example := range docExamples(t, "install.md", "### ClusterProfiles", 2) {
		examples = append(examples, writeFile(t, "values.yaml", example))
	}
	scheme := clusters.NewScheme()
	if err := inventoryv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	profileCRD, err := fleet.ClusterProfileCRD()
	if err != nil {
		t.Fatal(err)
	}
	// The hub serves the ClusterProfile CRD (its fleet manager's); the chart brings its own.
	h := startReleaseHub(t, fleet.Options{Scheme: scheme, HubCRDs: []string{profileCRD}, Members: []string{"alpha"}})
	ctx := context.Background()
	c := h.Hub.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-inventory"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	// The examples' provider, run from here: the plugin built for the
	// test, its token directory in dir.
	plugin := goBuild(t, "cmd/widgethub-credential")
	access := &fleet.AccessProvider{Name: "widgethub-tokens", Tokens: filepath.Join(dir, "tokens"), Plugin: plugin}
	providers, err := json.Marshal(map[string]any{"providers": []any{map[string]any{"name": access.Name, "execConfig": map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "args": []string{"--token-dir=" + access.Tokens}, "provideClusterInfo": true,
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Every release gets the local provider.
	helmIn := func(args ...string) {
		t.Helper()
		h.helm(t, append(args, "--set", "image.tag=v0.1.0", "--set-json", "clusterProfiles.providers="+string(providers))...)
	}
	// The plugin copied by an init container, then mounted as an image volume.
	helmIn("install", "widgethub", chartDir, "--values", examples[0], "--values", examples[1])
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "widgethub"}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.InitContainers) != 1 {
		t.Errorf("installed with %s: init containers %+v", examples[1], d.Spec.Template.Spec.InitContainers)
	}
	helmIn("upgrade", "widgethub", chartDir, "--values", examples[0])
	if err := c.Get(ctx, client.ObjectKeyFromObject(&d), &d); err != nil {
		t.Fatal(err)
	}
	if pod := d.Spec.Template.Spec; len(pod.InitContainers) != 0 || len(pod.Volumes) != 3 || pod.Volumes[1].Image == nil {
		t.Errorf("upgraded to %s: init containers %+v, volumes %+v", examples[0], pod.InitContainers, pod.Volumes)
	}

	// The member, reached through the provider with a token of its own.
	member := h.Member("alpha")
	hubtest.InstallMemberRole(t, member)
	memberToken := hubtest.ServiceAccountToken(t, member, "widgethub", "widgethub-member")
	fleet.HandOver(memberToken)
	managerBinary := goBuild(t, "cmd/widgethub")

	// Sharded (the default), then leader-elected: each a release of the
	// chart, its RBAC checked, its manager run and a ClusterProfile of its
	// own registered.
	for _, mode := range []struct {
		sharding       bool
		profile, shard string
	}{{true, "alpha", "widgethub-0"}, {false, "alpha-elected", ""}} {
		helmIn("upgrade", "widgethub", chartDir, "--values", examples[0], "--set", fmt.Sprintf("sharding=%t", mode.sharding))
		checkClusterProfileAccess(t, h, "fleet-inventory", mode.sharding)
		if err := access.Grant(mode.profile, member.Config.Host, memberToken); err != nil {
			t.Fatal(err)
		}
		stop := runInstalledManager(t, h.Hub, managerBinary, dir)
		if err := fleet.CreateClusterProfile(ctx, c, "fleet-inventory", mode.profile, access.Entry(mode.profile, member)); err != nil {
			t.Fatal(err)
		}
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			mc := &v1alpha1.MemberCluster{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "fleet-inventory", Name: mode.profile}, mc)).To(Succeed())
			ready := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(v1alpha1.MemberEngagedReason), "message: %s", ready.Message)
			g.Expect(mc.Status.ServedBy).To(Equal(mode.shard))
		}, time.Minute, 200*time.Millisecond).Should(Succeed(), "sharding %t: the MemberCluster fleet-inventory/%s", mode.sharding, mode.profile)
		g.Eventually(func(g Gomega) {
			events := &eventsv1.EventList{}
			g.Expect(c.List(ctx, events, client.InNamespace("fleet-inventory"))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Regarding.Kind", "ClusterProfile"), HaveField("Regarding.Name", mode.profile),
				HaveField("Reason", v1alpha1.MemberEngagedReason))))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "sharding %t: the Event about the ClusterProfile fleet-inventory/%s", mode.sharding, mode.profile)
		stop()
	}
}

// checkClusterProfileAccess checks what the manager's ServiceAccount may do
// in namespace, that of the ClusterProfiles: what the hub does there, and
// nothing else, sharded or not (no Lease: those stay in the registration
// namespace).
func checkClusterProfileAccess(t *testing.T, h *releaseHub, namespace string, sharding bool) {
	t.Helper()
	sa := "system:serviceaccount:" + releaseNamespace + ":widgethub"
	for _, tc := range []struct {
		verb, group, resource, subresource string
		allowed                            bool
	}{
		{"watch", "multicluster.x-k8s.io", "clusterprofiles", "", true},
		{"list", "multicluster.x-k8s.io", "clusterprofiles", "", true},
		{"update", "multicluster.x-k8s.io", "clusterprofiles", "status", false},
		{"update", "multicluster.x-k8s.io", "clusterprofiles", "finalizers", true},
		{"delete", "multicluster.x-k8s.io", "clusterprofiles", "", false},
		{"create", "widgethub.io", "memberclusters", "", true},
		{"patch", "widgethub.io", "memberclusters", "status", true},
		{"create", "events.k8s.io", "events", "", true},
		{"watch", "coordination.k8s.io", "leases", "", false},
		{"update", "coordination.k8s.io", "leases", "", false},
		{"list", "", "secrets", "", false},
		{"create", "", "serviceaccounts", "token", false},
	} {
		allowed := h.allowed(t, sa, authorizationv1.ResourceAttributes{Namespace: namespace, Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.subresource})
		if allowed != tc.allowed {
			t.Errorf("sharding %t: %s may %s %s %s/%s in %s: %v, want %v", sharding, sa, tc.verb, tc.group, tc.resource, tc.subresource, namespace, allowed, tc.allowed)
		}
	}
}

// runInstalledManager runs bin as the installed chart runs the manager, but
// as a process here: the Deployment's arguments, the installed ConfigMap for
// the mounted provider file, its ServiceAccount's token, no listeners, a
// replica id for the Pod's name. It returns a func that stops it, which
// t's cleanup calls too.
func runInstalledManager(t *testing.T, hub *fleet.ControlPlane, bin, dir string) (stop func()) {
	t.Helper()
	ctx := context.Background()
	var d appsv1.Deployment
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "widgethub"}, &d); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "widgethub-clusterprofiles"}, &cm); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(file, []byte(cm.Data["providers.json"]), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "manager.kubeconfig")
	if err := os.WriteFile(kubeconfig, hubtest.TokenKubeconfig(t, hub, hubtest.MintToken(t, hub, releaseNamespace, "widgethub")), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--replica-id=widgethub-0"}
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		switch name, _, _ := strings.Cut(arg, "="); name {
		case "--clusterprofile-provider-file":
			arg = name + "=" + file
		case "--metrics-bind-address", "--health-probe-bind-address":
			arg = name + "=0"
		}
		args = append(args, arg)
	}
	manager, err := fleet.StartProcess(bin, filepath.Join(t.TempDir(), "manager.log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			manager.Kill()
			if t.Failed() {
				t.Logf("manager %q:\n%s", args, manager.Log())
			}
			if err := manager.LeakedCredentials(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// goBuild builds the command in the module's directory dir for this test.
func goBuild(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	cmd := exec.Command("go", "build", "-o", bin, "./"+dir)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./%s: %v\n%s", dir, err, out)
	}
	return bin
}
