package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// refusedMessage is what the API server answers a refused Deployment write.
const refusedMessage = "Deployments are refused in this namespace (fleet.RefuseDeployments)"

// RefuseDeployments makes cp's API server refuse every Deployment create
// and update in namespace ns (made if missing), whoever asks, through a
// ValidatingAdmissionPolicy: a member that answers everything but those
// writes. It returns once a dry-run write there is refused; lift removes
// the policy.
func (cp *ControlPlane) RefuseDeployments(ctx context.Context, ns string) (lift func(context.Context) error, err error) {
	if err := EnsureNamespace(ctx, cp.Client, ns); err != nil {
		return nil, err
	}
	name := "fleet-refuse-deployments-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: refusedMessage}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	lift = func(ctx context.Context) error {
		for _, obj := range []client.Object{binding, policy} {
			if err := cp.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("lift the refusal of Deployments in %s: %w", ns, err)
			}
		}
		return nil
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := cp.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("refuse Deployments in %s: %w", ns, err)
		}
	}
	// The API server loads a policy asynchronously: wait until it refuses.
	labels := map[string]string{"app": "probe"}
	probe := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-probe"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "pause"}}}}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := cp.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), refusedMessage) {
			return lift, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the policy refusing Deployments in %s not in force after 30s: a dry-run write answered %v", ns, err)
		}
	}
}
