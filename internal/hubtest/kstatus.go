package hubtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The kinds whose kstatus the suites read.
var (
	WidgetGVK        = v1alpha1.GroupVersion.WithKind("Widget")
	MemberClusterGVK = v1alpha1.GroupVersion.WithKind("MemberCluster")
)

// KstatusIn reads the object key of kind gvk from c and returns what kstatus
// computes for it, and the object.
func KstatusIn(g Gomega, c client.Client, gvk schema.GroupVersionKind, key types.NamespacedName) (*kstatus.Result, *unstructured.Unstructured) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	g.Expect(c.Get(context.Background(), key, u)).To(Succeed())
	res, err := kstatus.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	return res, u
}

// ExpectKstatus waits until kstatus computes want for the object key of kind
// gvk in c, with the condition condType True with reason (the other of
// Reconciling and Stalled absent), or neither of them when condType is "".
// It returns the object's conditions then.
func ExpectKstatus(t *testing.T, c client.Client, gvk schema.GroupVersionKind, key types.NamespacedName,
	want kstatus.Status, condType, reason string) []metav1.Condition {
	t.Helper()
	var conditions []metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		res, u := KstatusIn(g, c, gvk, key)
		conditions = ConditionsOf(g, u)
		g.Expect(res.Status).To(Equal(want), "kstatus message: %s; conditions %+v", res.Message, conditions)
		for _, ct := range []string{"Reconciling", "Stalled"} {
			cond := meta.FindStatusCondition(conditions, ct)
			if ct != condType {
				g.Expect(cond).To(BeNil(), "%s", ct)
				continue
			}
			g.Expect(cond).NotTo(BeNil(), "%s", ct)
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(cond.Reason).To(Equal(reason), "message: %s", cond.Message)
		}
	}, Within, 20*time.Millisecond).Should(Succeed(), "%s %s", gvk.Kind, key)
	return conditions
}

// ConditionsOf is the status conditions of u.
func ConditionsOf(g Gomega, u *unstructured.Unstructured) []metav1.Condition {
	var obj struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	data, err := u.MarshalJSON()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &obj)).To(Succeed())
	return obj.Status.Conditions
}

// ExpectWidgetKstatus is ExpectKstatus for the Widget key of cp.
func ExpectWidgetKstatus(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, want kstatus.Status, condType, reason string) []metav1.Condition {
	t.Helper()
	return ExpectKstatus(t, cp.Client, WidgetGVK, key, want, condType, reason)
}

// ExpectMemberKstatus is ExpectKstatus for the MemberCluster name.
func ExpectMemberKstatus(t *testing.T, name string, want kstatus.Status, condType, reason string) []metav1.Condition {
	t.Helper()
	return ExpectKstatus(t, Fleet.Hub.Client, MemberClusterGVK, types.NamespacedName{Namespace: Namespace, Name: name}, want, condType, reason)
}
