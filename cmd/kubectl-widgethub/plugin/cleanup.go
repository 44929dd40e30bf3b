package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/widgethub/widgethub/clusters/connect"
)

// What join made is shared by every registration of the member (another
// hub's, or the same hub's under another name): one ServiceAccount, one
// ClusterRole and binding, two admission policies, one namespace. Only the
// token Secrets are per registration. So join takes over nothing it did not
// create (unless --adopt), and unjoin --cleanup deletes the shared objects
// only when no registration's token Secret is left, and the namespace only
// when it holds nothing join did not create.

// unownedObjects describes the objects join would apply that exist in the
// member without join's label: someone else made them.
func unownedObjects(ctx context.Context, c *kube) ([]string, error) {
	objs, err := memberObjects()
	if err != nil {
		return nil, err
	}
	var found []string
	for _, obj := range objs {
		what := describe(obj)
		err := c.Get(ctx, keyOf(obj), obj)
		switch {
		case apierrors.IsNotFound(err):
		case meta.IsNoMatchError(err):
			return nil, fmt.Errorf("the member does not serve %s, which join installs to fence the hub's identity "+
				"(ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1, Kubernetes 1.30 and later, served and enforced); join wrote nothing: %w",
				what, err)
		case err != nil:
			return nil, fmt.Errorf("get %s: %w", what, err)
		case obj.GetLabels()[managedByLabel] != fieldManager:
			found = append(found, what)
		}
	}
	return found, nil
}

// cleanupMember deletes what join created in the member, newest first, and
// says on out what it did and what it kept.
func cleanupMember(ctx context.Context, m *cluster, out io.Writer) error {
	others, err := tokenSecrets(ctx, m.client)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		fmt.Fprintf(out, "%s: kept the ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding, admission policies and namespace: "+
			"other registrations still hold tokens bound to Secrets in %s (%s); unjoin them first, "+
			"or delete those Secrets to revoke their tokens\n",
			m.role, MemberNamespace, strings.Join(others, ", "))
		return nil
	}
	objs, err := memberObjects()
	if err != nil {
		return err
	}
	slices.Reverse(objs)
	var errs []error
	for _, obj := range objs {
		if err := deleteIfManaged(ctx, m, obj, out); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return deleteNamespaceIfOurs(ctx, m, out)
}

// tokenSecrets describes the token Secrets left in the member namespace,
// with the registrations that hold their tokens.
func tokenSecrets(ctx context.Context, c *kube) ([]string, error) {
	var list corev1.SecretList
	err := c.List(ctx, &list, listOptions{namespace: MemberNamespace, labels: map[string]string{TokenSecretLabel: "true", managedByLabel: fieldManager}})
	if err != nil {
		return nil, fmt.Errorf("list token Secrets in %s: %w", MemberNamespace, err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, fmt.Sprintf("%s of registration %s", s.Name, s.Annotations[registrationAnnotation]))
	}
	return out, nil
}

func deleteIfManaged(ctx context.Context, m *cluster, obj object, out io.Writer) error {
	what := describe(obj)
	if err := m.client.Get(ctx, keyOf(obj), obj); apierrors.IsNotFound(err) {
		fmt.Fprintf(out, "%s: %s is already gone\n", m.role, what)
		return nil
	} else if err != nil {
		return fmt.Errorf("get %s: %w", what, err)
	}
	if obj.GetLabels()[managedByLabel] != fieldManager {
		fmt.Fprintf(out, "%s: kept %s: join did not create it\n", m.role, what)
		return nil
	}
	if err := m.client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	fmt.Fprintf(out, "%s: deleted %s\n", m.role, what)
	return nil
}

// deleteNamespaceIfOurs deletes the member namespace if join created it and
// it holds nothing join did not create.
func deleteNamespaceIfOurs(ctx context.Context, m *cluster, out io.Writer) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MemberNamespace}}
	err := m.client.Get(ctx, keyOf(ns), ns)
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(out, "%s: Namespace %s is already gone\n", m.role, MemberNamespace)
		return nil
	case err != nil:
		return fmt.Errorf("get Namespace %s: %w", MemberNamespace, err)
	case ns.Labels[managedByLabel] != fieldManager:
		fmt.Fprintf(out, "%s: kept Namespace %s: join did not create it\n", m.role, MemberNamespace)
		return nil
	}
	foreign, err := foreignObjects(ctx, m, MemberNamespace)
	if err != nil {
		fmt.Fprintf(out, "%s: kept Namespace %s: cannot tell whether it holds objects join did not create: %s\n",
			m.role, MemberNamespace, printable(connect.FirstLine(err)))
		return nil
	}
	if len(foreign) > 0 {
		fmt.Fprintf(out, "%s: kept Namespace %s: it holds objects join did not create: %s\n", m.role, MemberNamespace,
			printable(strings.Join(foreign, ", ")))
		return nil
	}
	if err := m.client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Namespace %s: %w", MemberNamespace, err)
	}
	fmt.Fprintf(out, "%s: deleted Namespace %s\n", m.role, MemberNamespace)
	return nil
}

// foreignObjects lists every kind of object the member serves in namespace
// and describes those join did not create, but for what Kubernetes puts in
// every namespace. An error means it cannot tell.
func foreignObjects(ctx context.Context, m *cluster, namespace string) ([]string, error) {
	resources, err := m.client.namespacedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover the namespaced resources: %w", err)
	}
	var found []string
	for gv, served := range resources {
		for _, r := range served {
			if !slices.Contains(r.Verbs, "list") || r.Kind == "Event" {
				continue
			}
			items, err := m.client.metadata.Resource(gv.WithResource(r.Name)).Namespace(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", schema.GroupResource{Group: gv.Group, Resource: r.Name}, err)
			}
			for _, it := range items.Items {
				if it.Labels[managedByLabel] != fieldManager && !inEveryNamespace(gv.Group, r.Kind, it.Name) {
					found = append(found, r.Kind+" "+it.Name)
				}
			}
		}
	}
	slices.Sort(found)
	return found, nil
}

// inEveryNamespace reports whether Kubernetes' controllers put the object in
// every namespace.
func inEveryNamespace(group, kind, name string) bool {
	return group == "" && (kind == "ServiceAccount" && name == "default" || kind == "ConfigMap" && name == "kube-root-ca.crt")
}

// describe names obj for messages: "Kind name" or "Kind namespace/name".
func describe(obj object) string {
	kind := fmt.Sprintf("%T", obj)
	if gvk, err := kindOf(obj); err == nil {
		kind = gvk.Kind
	}
	if obj.GetNamespace() != "" {
		return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}
