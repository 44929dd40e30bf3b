package app_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// The tests of this file read Widgets and MemberClusters back from their API
// servers as unstructured objects and ask the kstatus library what it makes
// of them, as Flux, kpt, Helm (--wait) and Argo CD's kstatus-based checks do.

// setDeploymentStatus plays the Deployment controller's part: it observes
// the Deployment's generation and reports status (whose conditions replace
// the Deployment's).
func setDeploymentStatus(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, status appsv1.DeploymentStatus) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		d := hubtest.Deployment(g, cp, key)
		d.Status = status
		d.Status.ObservedGeneration = d.Generation
		g.Expect(cp.Client.Status().Update(context.Background(), d)).To(Succeed())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}

// rolledOut is the status of a Deployment of n replicas, all updated and
// available, as the Deployment controller reports it.
func rolledOut(n int32) appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}}
}

func expectReady(t *testing.T, conditions []metav1.Condition, status metav1.ConditionStatus, reason string) {
	t.Helper()
	ready := meta.FindStatusCondition(conditions, "Ready")
	if ready == nil || ready.Status != status || ready.Reason != reason {
		t.Fatalf("Ready = %+v, want %s/%s (its contract is unchanged)", ready, status, reason)
	}
}

// A Widget is InProgress while its Deployment is created and rolls out,
// Current once it has rolled out, and Failed when its rollout passes its
// progress deadline or cannot create pods; Ready and observedGeneration say
// what they always said.
func TestWidgetStatusAsToolsReadIt(t *testing.T) {
	g := NewWithT(t)
	alpha := testFleet.Member("alpha")
	hubtest.Register(t, "alpha", alpha)
	key := hubtest.CreateShopWidget(t, alpha, "kstatus", 2)

	// Created: envtest runs no Deployment controller, so the Deployment's
	// generation stays unobserved until the test plays its part.
	conds := hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.InProgressStatus, "Reconciling", v1alpha1.WidgetDeploymentPendingReason)
	expectReady(t, conds, metav1.ConditionFalse, v1alpha1.WidgetProgressingReason)
	w := hubtest.Widget(g, alpha, key)
	g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))

	setDeploymentStatus(t, alpha, key, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1})
	conds = hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.InProgressStatus, "Reconciling", v1alpha1.WidgetRollingOutReason)
	g.Expect(meta.FindStatusCondition(conds, "Reconciling").Message).To(Equal("1/2 replicas available"))

	setDeploymentStatus(t, alpha, key, rolledOut(2))
	conds = hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.CurrentStatus, "", "")
	expectReady(t, conds, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason)

	// A new image: the Deployment's new generation is pending, then rolls
	// out while both old replicas stay available (Ready stays True).
	g.Eventually(func(g Gomega) {
		w := hubtest.Widget(g, alpha, key)
		w.Spec.Image = "registry.k8s.io/pause:3.9"
		g.Expect(alpha.Client.Update(context.Background(), w)).To(Succeed())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	conds = hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.InProgressStatus, "Reconciling", v1alpha1.WidgetDeploymentPendingReason)
	expectReady(t, conds, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason)
	w = hubtest.Widget(g, alpha, key)
	g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
	rolling := rolledOut(2)
	rolling.Replicas, rolling.UpdatedReplicas = 3, 1
	setDeploymentStatus(t, alpha, key, rolling)
	conds = hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.InProgressStatus, "Reconciling", v1alpha1.WidgetRollingOutReason)
	expectReady(t, conds, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason)

	// The rollout passes its progress deadline.
	stuck := rolling
	stuck.AvailableReplicas = 1
	stuck.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "kstatus-2" has timed out progressing.`}}
	setDeploymentStatus(t, alpha, key, stuck)
	conds = hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.FailedStatus, "Stalled", v1alpha1.WidgetDeploymentFailedReason)
	g.Expect(meta.FindStatusCondition(conds, "Stalled").Message).To(ContainSubstring("progress deadline"))
	expectReady(t, conds, metav1.ConditionFalse, v1alpha1.WidgetProgressingReason)
	expectWidgetEvent(t, alpha, key, corev1.EventTypeWarning, v1alpha1.WidgetDeploymentFailedReason, "progress deadline")

	setDeploymentStatus(t, alpha, key, rolledOut(2))
	hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.CurrentStatus, "", "")

	// Pods cannot be created (a quota, say).
	failing := rolledOut(2)
	failing.AvailableReplicas = 1
	failing.Conditions = append(failing.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure,
		Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "pods are forbidden: exceeded quota"})
	setDeploymentStatus(t, alpha, key, failing)
	conds = hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.FailedStatus, "Stalled", v1alpha1.WidgetDeploymentFailedReason)
	g.Expect(meta.FindStatusCondition(conds, "Stalled").Message).To(ContainSubstring("exceeded quota"))

	setDeploymentStatus(t, alpha, key, rolledOut(2))
	hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.CurrentStatus, "", "")
}

// expectWidgetEvent waits for an Event of type and reason about the Widget
// key of cp whose note holds words.
func expectWidgetEvent(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, eventType, reason, words string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(cp.Client.List(context.Background(), list, client.InNamespace(key.Namespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Widget" && e.Regarding.Name == key.Name && e.Type == eventType && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(words)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "%s Event %s about Widget %s", eventType, reason, key)
}

// A Deployment the member refuses stalls the Widget (Failed); once the
// member accepts it, the Widget is on its way again.
func TestRefusedDeploymentWriteStallsTheWidget(t *testing.T) {
	alpha := testFleet.Member("alpha")
	hubtest.Register(t, "alpha", alpha)
	const ns = "kstatus-refused"
	lift := hubtest.DenyDeploymentWritesInForce(t, alpha, ns)
	hubtest.CreateWidget(t, alpha, ns, "refused", 1)
	key := types.NamespacedName{Namespace: ns, Name: "refused"}

	conds := hubtest.ExpectWidgetKstatus(t, alpha, key, kstatus.FailedStatus, "Stalled", v1alpha1.WidgetDeploymentFailedReason)
	g := NewWithT(t)
	g.Expect(meta.FindStatusCondition(conds, "Stalled").Message).To(ContainSubstring("Deployments are refused in this namespace"))
	expectReady(t, conds, metav1.ConditionFalse, v1alpha1.WidgetDeploymentFailedReason)

	lift()
	expectRollsOutOnChange(t, alpha, key)
}

// expectRollsOutOnChange scales the Widget key of cp to 2 replicas, which is
// reconciled at once rather than at a failed write's backoff, and waits for
// it to be InProgress with its Deployment written, then Current once that
// Deployment has rolled out.
func expectRollsOutOnChange(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName) {
	t.Helper()
	hubtest.SetReplicas(t, cp, key, 2)
	hubtest.ExpectWidgetKstatus(t, cp, key, kstatus.InProgressStatus, "Reconciling", v1alpha1.WidgetDeploymentPendingReason)
	setDeploymentStatus(t, cp, key, rolledOut(2))
	hubtest.ExpectWidgetKstatus(t, cp, key, kstatus.CurrentStatus, "", "")
}

// A Deployment write that fails in a way a retry may fix (500) keeps the
// Widget InProgress, never Failed, and it rolls out once writes pass.
func TestFailingDeploymentWriteKeepsTheWidgetInProgress(t *testing.T) {
	gamma := testFleet.Member("gamma")
	hubtest.ExpectUnregistrationsDone(t)
	withoutDirectRegistration(t, "gamma", gamma)
	m := registerThroughProxy(t, "kstatus-gamma", gamma)
	m.proxy.Set(fleet.Fault{Status: http.StatusInternalServerError, Match: func(r *http.Request) bool {
		return fleet.Writes(r) && strings.Contains(r.URL.Path, "/deployments")
	}})
	t.Cleanup(m.proxy.Clear)

	const ns = "kstatus-retrying"
	hubtest.CreateWidget(t, gamma, ns, "retrying", 1)
	key := types.NamespacedName{Namespace: ns, Name: "retrying"}
	conds := hubtest.ExpectWidgetKstatus(t, gamma, key, kstatus.InProgressStatus, "Reconciling", v1alpha1.WidgetDeploymentRetryingReason)
	expectReady(t, conds, metav1.ConditionFalse, v1alpha1.WidgetDeploymentFailedReason)
	NewWithT(t).Consistently(func(g Gomega) {
		res, _ := hubtest.KstatusIn(g, gamma.Client, hubtest.WidgetGVK, key)
		g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), "kstatus message: %s", res.Message)
	}, hubtest.QuietFor, hubtest.Poll).Should(Succeed())

	m.proxy.Clear()
	expectRollsOutOnChange(t, gamma, key)
}

// A MemberCluster is InProgress while the hub engages the member or waits
// for it to answer, Failed for a registration that needs a user's change,
// and Current once engaged; Ready keeps its reasons.
func TestMemberClusterStatusAsToolsReadIt(t *testing.T) {
	alpha := testFleet.Member("alpha")
	hubtest.RegisterEngaged(t, "alpha", alpha) // kstatus calls a MemberCluster without conditions yet Current
	conds := hubtest.ExpectMemberKstatus(t, "alpha", kstatus.CurrentStatus, "", "")
	expectReady(t, conds, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	_ = refused.Close()
	unprivileged := hubtest.ServiceAccountToken(t, alpha, "kstatus-no-rights", "")
	for _, tc := range []struct {
		name, kubeconfig string
		data             []byte
		want             kstatus.Status
		condType, reason string
	}{
		{"invalid", "kubeconfig", []byte("not a kubeconfig: ["), kstatus.FailedStatus, "Stalled", v1alpha1.MemberInvalidKubeconfigReason},
		{"unsafe", "kubeconfig", hubtest.EditKubeconfig(t, alpha.Kubeconfig, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificateData, u.ClientKeyData, u.TokenFile = nil, nil, "/etc/hostname"
		}), kstatus.FailedStatus, "Stalled", v1alpha1.MemberUnsafeKubeconfigReason},
		{"forbidden", "kubeconfig", hubtest.TokenKubeconfig(t, alpha, unprivileged), kstatus.FailedStatus, "Stalled", v1alpha1.MemberForbiddenReason},
		{"refused", "kubeconfig", hubtest.EditKubeconfig(t, alpha.Kubeconfig, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = "https://" + refusedAddr
		}), kstatus.InProgressStatus, "Reconciling", v1alpha1.MemberUnreachableReason},
	} {
		name := "kstatus-" + tc.name
		hubtest.RegisterData(t, name, map[string][]byte{tc.kubeconfig: tc.data}) // until the test ends
		t.Run(tc.name, func(t *testing.T) {
			conds := hubtest.ExpectMemberKstatus(t, name, tc.want, tc.condType, tc.reason)
			expectReady(t, conds, metav1.ConditionFalse, tc.reason)
		})
	}

	// Fixed by the user: the Stalled registration's Secret now holds a
	// usable kubeconfig, and its MemberCluster turns Current.
	hubtest.Register(t, "kstatus-invalid", alpha)
	conds = hubtest.ExpectMemberKstatus(t, "kstatus-invalid", kstatus.CurrentStatus, "", "")
	expectReady(t, conds, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}

// While the hub engages a new member it shows Reconciling (Engaging), and
// then Unreachable while the member does not answer: InProgress throughout
// until it is engaged.
func TestEngagingMemberIsInProgress(t *testing.T) {
	alpha := testFleet.Member("alpha")
	hanging, kubeconfig := hubtest.TCPProxied(t, alpha)
	hanging.Hang(true)
	hubtest.RegisterData(t, "kstatus-hanging", map[string][]byte{"kubeconfig": kubeconfig})

	// The first attempt hangs for the probe timeout (3s): its MemberCluster
	// says so meanwhile.
	conds := hubtest.ExpectMemberKstatus(t, "kstatus-hanging", kstatus.InProgressStatus, "Reconciling", v1alpha1.MemberEngagingReason)
	if ready := meta.FindStatusCondition(conds, "Ready"); ready != nil {
		t.Fatalf("a member never engaged shows Ready %+v while it is engaged", ready)
	}
	conds = hubtest.ExpectMemberKstatus(t, "kstatus-hanging", kstatus.InProgressStatus, "Reconciling", v1alpha1.MemberUnreachableReason)
	expectReady(t, conds, metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)

	hanging.Hang(false)
	conds = hubtest.ExpectMemberKstatus(t, "kstatus-hanging", kstatus.CurrentStatus, "", "")
	expectReady(t, conds, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}
