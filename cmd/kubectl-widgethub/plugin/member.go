package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/widgethub/widgethub/config"
)

// What join creates in a member. The names are fixed so that joining again
// (with --overwrite) updates the same objects and unjoin --cleanup finds them.
const (
	// MemberNamespace holds the hub's ServiceAccount in the member.
	MemberNamespace = "widgethub-system"
	// MemberServiceAccount is the identity the hub uses in the member.
	MemberServiceAccount = "widgethub-member"
	// MemberClusterRole names the ClusterRole and the ClusterRoleBinding, and
	// the Role and RoleBinding in MemberNamespace.
	MemberClusterRole = "widgethub-member"
	// MemberAdmissionPolicy names the ValidatingAdmissionPolicy and its
	// binding that fence the hub's writes of Deployments.
	MemberAdmissionPolicy = "widgethub-member"
	// MemberTokenPolicy names the ValidatingAdmissionPolicy and its binding
	// that fence the tokens the hub may request.
	MemberTokenPolicy = "widgethub-member-token"
	// WidgetCRDName is the Widget CRD's name.
	WidgetCRDName = "widgets.widgethub.io"

	// DefaultTokenTTL is the requested lifetime of a joined member's token:
	// the hub renews it when half of it is left (its
	// --token-renew-remaining), so a failing renewal leaves days to act
	// before the member goes offline, and a copy of the token works for a
	// week at most.
	DefaultTokenTTL = 7 * 24 * time.Hour
)

// managedBy marks the objects join created, and only those are deleted by
// unjoin --cleanup: a namespace that existed before join carries no such label.
var managedBy = map[string]string{managedByLabel: fieldManager, "app.kubernetes.io/part-of": "widgethub"}

// managedByLabel is the label that tells join's objects: its value is fieldManager.
const managedByLabel = "app.kubernetes.io/managed-by"

// discoveryRule lets the hub read API discovery, the server version and
// /readyz: what its REST mapper, its health probe and its preflight read.
// Kubernetes grants these to every authenticated user by default
// (system:discovery, system:public-info-viewer); the rule keeps the hub
// working on a member that has narrowed those defaults.
var discoveryRule = rbacv1.PolicyRule{
	NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/version", "/readyz"},
	Verbs:           []string{"get"},
}

// memberUsername is the user name of the hub's ServiceAccount in a member.
var memberUsername = "system:serviceaccount:" + MemberNamespace + ":" + MemberServiceAccount

// MemberPolicy returns the ValidatingAdmissionPolicy and its binding
// that join installs in a member (config/member-rbac/admission-policy.yaml):
// the hub's ServiceAccount may create and update only Deployments of the
// shape the Widget reconciler writes (updates only of its own, keeping their
// owner), and none in kube-system.
func MemberPolicy() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	return memberPolicy(config.MemberAdmissionPolicy, MemberAdmissionPolicy)
}

// TokenPolicy returns the ValidatingAdmissionPolicy and its binding that
// join installs in a member (config/member-rbac/token-policy.yaml): the
// hub's ServiceAccount may request only tokens bound to a Secret join made.
func TokenPolicy() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	return memberPolicy(config.MemberTokenPolicy, MemberTokenPolicy)
}

// memberPolicy decodes the policy called name and its binding from data,
// and checks that the policy matches exactly the requests of the hub's
// ServiceAccount.
func memberPolicy(data []byte, name string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding, error) {
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := decodeOne(data, "ValidatingAdmissionPolicy", policy); err != nil {
		return nil, nil, fmt.Errorf("embedded admission policy %s: %w", name, err)
	}
	if err := decodeOne(data, "ValidatingAdmissionPolicyBinding", binding); err != nil {
		return nil, nil, fmt.Errorf("embedded admission policy %s: %w", name, err)
	}
	want := fmt.Sprintf("request.userInfo.username == %q", memberUsername)
	if c := policy.Spec.MatchConditions; len(c) != 1 || strings.TrimSpace(c[0].Expression) != want {
		return nil, nil, fmt.Errorf("embedded admission policy %s: its one matchCondition must be %s", name, want)
	}
	if policy.Name != name || binding.Name != name || binding.Spec.PolicyName != policy.Name {
		return nil, nil, fmt.Errorf("embedded admission policy %s: policy and binding must be named %s", name, name)
	}
	return policy, binding, nil
}

// MemberRules are the rules of the ClusterRole join grants the hub in a
// member: those of config/member-rbac/role.yaml (generated from the Widget
// reconciler's RBAC markers), then discoveryRule.
func MemberRules() ([]rbacv1.PolicyRule, error) {
	var role rbacv1.ClusterRole
	if err := decodeOne(config.MemberRole, "ClusterRole", &role); err != nil {
		return nil, fmt.Errorf("embedded member role: %w", err)
	}
	return append(role.Rules, discoveryRule), nil
}

// MemberTokenRules are the rules of the Role join grants the hub in the
// member namespace (config/member-rbac/role.yaml, generated from the markers
// of package clusters): create a token of the ServiceAccount widgethub-member,
// of no other, so that the hub renews its token itself.
func MemberTokenRules() ([]rbacv1.PolicyRule, error) {
	var role rbacv1.Role
	if err := decodeOne(config.MemberRole, "Role", &role); err != nil {
		return nil, fmt.Errorf("embedded member role: %w", err)
	}
	if role.Namespace != MemberNamespace {
		return nil, fmt.Errorf("embedded member role: the Role is in namespace %q, want %s", role.Namespace, MemberNamespace)
	}
	return role.Rules, nil
}

// decodeOne decodes the first YAML document of kind from data into into.
func decodeOne(data []byte, kind string, into any) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("no %s in the document", kind)
		}
		if err != nil {
			return err
		}
		if doc["kind"] != kind {
			continue
		}
		return runtime.DefaultUnstructuredConverter.FromUnstructured(doc, into)
	}
}

// memberObjects are the objects join applies in a member besides the CRD, in
// order: the admission policies are in place before the RBAC that they fence.
func memberObjects() ([]object, error) {
	rules, err := MemberRules()
	if err != nil {
		return nil, err
	}
	tokenRules, err := MemberTokenRules()
	if err != nil {
		return nil, err
	}
	policy, binding, err := MemberPolicy()
	if err != nil {
		return nil, err
	}
	tokenPolicy, tokenBinding, err := TokenPolicy()
	if err != nil {
		return nil, err
	}
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: managedBy}
	}
	policy.ObjectMeta, binding.ObjectMeta = meta(policy.Name, ""), meta(binding.Name, "")
	tokenPolicy.ObjectMeta, tokenBinding.ObjectMeta = meta(tokenPolicy.Name, ""), meta(tokenBinding.Name, "")
	return []object{
		policy,
		binding,
		tokenPolicy,
		tokenBinding,
		&corev1.ServiceAccount{ObjectMeta: meta(MemberServiceAccount, MemberNamespace)},
		&rbacv1.ClusterRole{ObjectMeta: meta(MemberClusterRole, ""), Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: meta(MemberClusterRole, ""),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MemberClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MemberServiceAccount, Namespace: MemberNamespace}},
		},
		&rbacv1.Role{ObjectMeta: meta(MemberClusterRole, MemberNamespace), Rules: tokenRules},
		&rbacv1.RoleBinding{
			ObjectMeta: meta(MemberClusterRole, MemberNamespace),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: MemberClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MemberServiceAccount, Namespace: MemberNamespace}},
		},
	}, nil
}

// installCRD applies the embedded Widget CRD and waits until it is served.
func installCRD(ctx context.Context, c *kube) error {
	crd := &unstructured.Unstructured{}
	if err := decodeOne(config.WidgetCRD, "CustomResourceDefinition", &crd.Object); err != nil {
		return fmt.Errorf("embedded Widget CRD: %w", err)
	}
	if err := c.Apply(ctx, crd); err != nil {
		return fmt.Errorf("apply CRD %s: %w", WidgetCRDName, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Name: WidgetCRDName}, crd); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s is not established: %w", WidgetCRDName, err)
	}
	return nil
}

// ensureNamespace creates the member namespace when it is missing; only a
// namespace it creates carries the managedBy labels.
func ensureNamespace(ctx context.Context, c *kube) (created bool, err error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MemberNamespace, Labels: managedBy}}
	err = c.Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create namespace %s: %w", MemberNamespace, err)
	}
	return true, nil
}
