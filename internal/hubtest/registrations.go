package hubtest

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Register creates or updates the registration Secret name with member's
// kubeconfig until the test ends: then it is deleted, so that no later test
// finds the member registered.
func Register(t *testing.T, name string, member *fleet.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	secret := registration.NewSecret(Namespace, name, member.Kubeconfig)
	t.Cleanup(func() { Unregister(t, name) })
	err := Fleet.Hub.Client.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		current := &corev1.Secret{}
		if err := Fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(secret), current); err != nil {
			t.Fatal(err)
		}
		current.Data = secret.Data
		err = Fleet.Hub.Client.Update(ctx, current)
	}
	if err != nil {
		t.Fatalf("Register %s: %v", name, err)
	}
}

// RegisterData creates the registration Secret name with data, deleted
// when t ends.
func RegisterData(t *testing.T, name string, data map[string][]byte) {
	t.Helper()
	secret := registration.NewSecret(Namespace, name, nil)
	secret.Data = data
	if err := Fleet.Hub.Client.Create(context.Background(), secret); err != nil {
		t.Fatalf("create Secret %s: %v", name, err)
	}
	t.Cleanup(func() { Unregister(t, name) })
}

// RegisterEngaged registers member as name until the test ends and waits
// until the hub has engaged it.
func RegisterEngaged(t *testing.T, name string, member *fleet.ControlPlane) *v1alpha1.MemberCluster {
	t.Helper()
	Register(t, name, member)
	return ExpectMemberReady(t, name, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}

// Unregister deletes the registration Secret name, if it is there.
func Unregister(t *testing.T, name string) {
	t.Helper()
	UnregisterIn(t, Namespace, name)
}

// UnregisterIn deletes the registration Secret ns/name, if there is one.
func UnregisterIn(t *testing.T, ns, name string) {
	t.Helper()
	secret := registration.NewSecret(ns, name, nil)
	if err := Fleet.Hub.Client.Delete(context.Background(), secret); client.IgnoreNotFound(err) != nil {
		t.Fatalf("Unregister %s/%s: %v", ns, name, err)
	}
}

// ExpectMemberReady waits until name's Ready condition has status and reason,
// with a message containing each of words.
func ExpectMemberReady(t *testing.T, name string, status metav1.ConditionStatus, reason string, words ...string) *v1alpha1.MemberCluster {
	t.Helper()
	var mc *v1alpha1.MemberCluster
	NewWithT(t).Eventually(func(g Gomega) {
		mc = MemberCluster(g, name)
		ready := ReadyConditionOf(mc)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason), "message: %s", ready.Message)
		for _, w := range words {
			g.Expect(ready.Message).To(ContainSubstring(w))
		}
	}, Within, Poll).Should(Succeed(), "MemberCluster %s", name)
	return mc
}

// ExpectMemberReadySince is ExpectMemberReady for a status written after
// since: status.lastProbeTime (whole seconds) is later than since's second.
func ExpectMemberReadySince(t *testing.T, name string, since time.Time, status metav1.ConditionStatus, reason string) *v1alpha1.MemberCluster {
	t.Helper()
	var mc *v1alpha1.MemberCluster
	NewWithT(t).Eventually(func(g Gomega) {
		mc = MemberCluster(g, name)
		g.Expect(mc.Status.LastProbeTime).NotTo(BeNil())
		g.Expect(mc.Status.LastProbeTime.Time.After(since.Truncate(time.Second))).To(BeTrue(), "status written at %s, before %s", mc.Status.LastProbeTime, since)
		ready := ReadyConditionOf(mc)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason), "message: %s", ready.Message)
	}, Within, Poll).Should(Succeed(), "MemberCluster %s", name)
	return mc
}

// MemberCluster returns the hub's MemberCluster called name.
func MemberCluster(g Gomega, name string) *v1alpha1.MemberCluster {
	mc := &v1alpha1.MemberCluster{}
	g.Expect(Fleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: Namespace, Name: name}, mc)).To(Succeed())
	return mc
}

// ReadyConditionOf is mc's Ready condition, nil when it has none.
func ReadyConditionOf(mc *v1alpha1.MemberCluster) *metav1.Condition {
	for i := range mc.Status.Conditions {
		if mc.Status.Conditions[i].Type == v1alpha1.MemberReady {
			return &mc.Status.Conditions[i]
		}
	}
	return nil
}

// ExpectUnregistered waits until the hub has acted on the removal of the
// registration name: its MemberCluster is deleted, which the hub does after
// it disengaged the member (stopped its caches and watches). The caller must
// have seen the MemberCluster of that registration first: it is written
// after the engagement, so it may still be missing just after one.
func ExpectUnregistered(t *testing.T, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(Fleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: Namespace, Name: name}, &v1alpha1.MemberCluster{}))
	}, Within, Poll).Should(BeTrue(), "the MemberCluster %s of a removed registration", name)
}

// ExpectUnregistrationsDone waits until the hub has acted on every removed
// registration: each MemberCluster left has a labelled registration Secret.
// Earlier tests remove theirs when they end; until the hub disengages them,
// they may still reconcile their members' Widgets.
func ExpectUnregistrationsDone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func(g Gomega) {
		list := &v1alpha1.MemberClusterList{}
		g.Expect(Fleet.Hub.Client.List(ctx, list, client.InNamespace(Namespace))).To(Succeed())
		for _, mc := range list.Items {
			secret := &corev1.Secret{}
			g.Expect(Fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&mc), secret)).To(Succeed(), "MemberCluster %s without its Secret", mc.Name)
			g.Expect(secret.Labels).To(HaveKeyWithValue(registration.SecretLabel, "true"), "MemberCluster %s of an unlabelled Secret", mc.Name)
		}
	}, Within, Poll).Should(Succeed())
}

// SecretEvents lists the hub Events about a registration Secret.
func SecretEvents(g Gomega, secret string) []corev1.Event {
	list := &corev1.EventList{}
	g.Expect(Fleet.Hub.Client.List(context.Background(), list, client.InNamespace(Namespace))).To(Succeed())
	var events []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Secret" && e.InvolvedObject.Name == secret {
			events = append(events, e)
		}
	}
	return events
}

// SecretEventsV1 lists the hub's events.k8s.io Events about a registration Secret.
func SecretEventsV1(g Gomega, secret string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(Fleet.Hub.Client.List(context.Background(), list, client.InNamespace(Namespace))).To(Succeed())
	var events []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Secret" && e.Regarding.Name == secret {
			events = append(events, e)
		}
	}
	return events
}

// SecretEventReasons lists the reasons of the hub Events about a registration Secret.
func SecretEventReasons(g Gomega, secret string) []string {
	var reasons []string
	for _, e := range SecretEvents(g, secret) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// ExpectReconcilesPromptly changes a Widget in beta and waits for its
// Deployment to follow: faults elsewhere must not hold healthy members up.
func ExpectReconcilesPromptly(t *testing.T, name string, replicas int32) time.Duration {
	t.Helper()
	g := NewWithT(t)
	beta := Fleet.Member("beta")
	Register(t, "beta", beta)
	key := types.NamespacedName{Namespace: "shop", Name: name}
	if err := beta.Client.Get(context.Background(), key, &v1alpha1.Widget{}); apierrors.IsNotFound(err) {
		CreateWidget(t, beta, key.Namespace, key.Name, replicas)
	} else {
		g.Eventually(func(g Gomega) {
			w := Widget(g, beta, key)
			w.Spec.Replicas = ptr.To(replicas)
			g.Expect(beta.Client.Update(context.Background(), w)).To(Succeed())
		}, Within, Poll).Should(Succeed())
	}
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(Deployment(g, beta, key).Spec.Replicas).To(Equal(ptr.To(replicas)))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "a healthy member's change waited behind faulty members")
	return time.Since(start)
}

// RefusedRegistration is the data of a registration Secret the hub must
// refuse, with the reason and the words of the Ready condition it reports.
type RefusedRegistration struct {
	Name, Reason string
	Data         map[string][]byte
	Words        []string
}

// ExpectRefusedWhileServing registers each of regs as the Secret
// prefix-name, checks that a healthy member's change is reconciled promptly
// meanwhile (while says what the registrations go through), then, in a
// subtest per registration, waits until its MemberCluster reports the
// refusal and runs check with the Secret's name.
func ExpectRefusedWhileServing(t *testing.T, prefix, while string, regs []RefusedRegistration, check func(t *testing.T, secret string, mc *v1alpha1.MemberCluster)) {
	t.Helper()
	for _, r := range regs {
		RegisterData(t, prefix+"-"+r.Name, r.Data)
	}
	took := ExpectReconcilesPromptly(t, "unbothered-by-"+prefix, 2)
	t.Logf("healthy member reconciled a change in %s while %s", took, while)
	for _, r := range regs {
		t.Run(r.Name, func(t *testing.T) {
			mc := ExpectMemberReady(t, prefix+"-"+r.Name, metav1.ConditionFalse, r.Reason, r.Words...)
			check(t, prefix+"-"+r.Name, mc)
		})
	}
}

// Refused is the RefusedRegistration name, with data, whose Ready condition
// has reason and says words.
func Refused(name, reason string, data map[string][]byte, words []string) RefusedRegistration {
	return RefusedRegistration{Name: name, Reason: reason, Data: data, Words: words}
}
