package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/widgethub/widgethub/clusters/connect"
)

// kube is the plugin's client of one API server: it reads and writes the
// typed objects of scheme (and unstructured ones) through client-go's dynamic
// client, and finds the resource that serves a kind in the server's discovery
// documents, as kubectl does. It stands in for controller-runtime's client,
// which links every API group of k8s.io/api (through client-go's typed
// scheme) into a tool for laptops: hack/verify-plugin-deps.sh keeps that out.
type kube struct {
	raw     rest.Interface
	dynamic *dynamic.DynamicClient
	// metadata lists objects' metadata only: foreignObjects reads no
	// Secret's data.
	metadata metadata.Interface

	mu sync.Mutex
	// served holds the resources of the group versions looked up so far; a
	// group version or kind not found is asked again on the next call, as a
	// CRD may be served since.
	served map[schema.GroupVersion][]metav1.APIResource
}

// object is what kube reads and writes: a typed object of scheme or an
// unstructured one that names its kind.
type object interface {
	metav1.Object
	runtime.Object
}

// listOptions narrows a List: the namespace ("" for every namespace), the
// labels its items carry, and at most how many (0: all).
type listOptions struct {
	namespace string
	labels    map[string]string
	limit     int64
}

// newKube is a client for cfg whose requests all go through one HTTP
// client that follows no redirect (connect.HTTPClientFor).
func newKube(cfg *rest.Config) (*kube, error) {
	hc, err := connect.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	cfg = dynamic.ConfigFor(cfg)
	cfg.GroupVersion = nil
	raw, err := rest.UnversionedRESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &kube{raw: raw, dynamic: dynamic.New(raw), metadata: md, served: map[schema.GroupVersion][]metav1.APIResource{}}, nil
}

// keyOf is obj's namespace and name.
func keyOf(obj metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// kindOf is obj's kind: an unstructured object's own, a typed one's in scheme.
func kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		gvk := u.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			return gvk, fmt.Errorf("unstructured object without a kind")
		}
		return gvk, nil
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return gvks[0], nil
}

// Get reads the object key names into obj.
func (k *kube) Get(ctx context.Context, key types.NamespacedName, obj object) error {
	r, err := k.resourceOf(ctx, obj)
	if err != nil {
		return err
	}
	u, err := r.Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return into(u.Object, obj)
}

// List reads into list (a typed list of scheme) the objects opts selects.
func (k *kube) List(ctx context.Context, list runtime.Object, opts listOptions) error {
	gvk, err := kindOf(list)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	gvr, err := k.resourceFor(ctx, gvk)
	if err != nil {
		return err
	}
	items, err := k.dynamic.Resource(gvr).Namespace(opts.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(opts.labels).String(),
		Limit:         opts.limit,
	})
	if err != nil {
		return err
	}
	return into(items.UnstructuredContent(), list)
}

// Create creates obj and reads back what the server made of it.
func (k *kube) Create(ctx context.Context, obj object, opts metav1.CreateOptions) error {
	return k.write(ctx, obj, func(r dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return r.Create(ctx, u, opts)
	})
}

// Update replaces obj (at its resourceVersion) and reads back the result.
func (k *kube) Update(ctx context.Context, obj object) error {
	return k.write(ctx, obj, func(r dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return r.Update(ctx, u, metav1.UpdateOptions{})
	})
}

// Apply server-side applies obj as the plugin's field manager, taking over
// fields another manager set (an earlier kubectl apply of the same
// manifests), and reads back the result.
func (k *kube) Apply(ctx context.Context, obj object) error {
	return k.write(ctx, obj, func(r dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		return r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	})
}

// CreateSubresource creates body in obj's subresource (a ServiceAccount's
// token) and reads the answer into body.
func (k *kube) CreateSubresource(ctx context.Context, obj object, subresource string, body runtime.Object) error {
	r, err := k.resourceOf(ctx, obj)
	if err != nil {
		return err
	}
	req, err := unstructuredOf(body)
	if err != nil {
		return err
	}
	// The dynamic client takes the path's name from the body.
	req.SetName(obj.GetName())
	got, err := r.Namespace(obj.GetNamespace()).Create(ctx, req, metav1.CreateOptions{}, subresource)
	if err != nil {
		return err
	}
	return into(got.Object, body)
}

// Delete deletes obj, and only obj: the precondition on its UID keeps a
// successor of the same name.
func (k *kube) Delete(ctx context.Context, obj object) error {
	r, err := k.resourceOf(ctx, obj)
	if err != nil {
		return err
	}
	uid := obj.GetUID()
	return r.Namespace(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// write sends obj, as an unstructured object of its kind, through do and
// reads the server's answer back into obj.
func (k *kube) write(ctx context.Context, obj object, do func(dynamic.ResourceInterface, *unstructured.Unstructured) (*unstructured.Unstructured, error)) error {
	u, err := unstructuredOf(obj)
	if err != nil {
		return err
	}
	gvr, err := k.resourceFor(ctx, u.GroupVersionKind())
	if err != nil {
		return err
	}
	got, err := do(k.dynamic.Resource(gvr).Namespace(obj.GetNamespace()), u)
	if err != nil {
		return err
	}
	return into(got.Object, obj)
}

// unstructuredOf is obj as an unstructured object that names its kind.
func unstructuredOf(obj runtime.Object) (*unstructured.Unstructured, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: fields}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// into fills obj from an object's (or a list's) fields. A typed object is
// left without apiVersion and kind, as client-go's typed clients leave it.
func into(fields map[string]any, obj runtime.Object) error {
	if u, ok := obj.(runtime.Unstructured); ok {
		u.SetUnstructuredContent(fields)
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fields, obj); err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return nil
}

// resourceOf is the dynamic client of obj's resource.
func (k *kube) resourceOf(ctx context.Context, obj runtime.Object) (dynamic.NamespaceableResourceInterface, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	gvr, err := k.resourceFor(ctx, gvk)
	if err != nil {
		return nil, err
	}
	return k.dynamic.Resource(gvr), nil
}

// resourceFor is the resource that serves gvk, from the discovery document
// of its group version (bounded, and without a name that is not one path
// segment: connect.ServedResources). A kind the server does not serve is a
// meta.NoKindMatchError, as with any client's REST mapper.
func (k *kube) resourceFor(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	gv := gvk.GroupVersion()
	k.mu.Lock()
	known := k.served[gv]
	k.mu.Unlock()
	if r, ok := resourceOfKind(known, gvk.Kind); ok {
		return gv.WithResource(r), nil
	}
	served, err := connect.ServedResources(ctx, k.raw, gv)
	if apierrors.IsNotFound(err) {
		served, err = nil, nil
	}
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("discover the resources of %s: %w", gv, err)
	}
	k.mu.Lock()
	k.served[gv] = served
	k.mu.Unlock()
	if r, ok := resourceOfKind(served, gvk.Kind); ok {
		return gv.WithResource(r), nil
	}
	return schema.GroupVersionResource{}, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gv.Version}}
}

// resourceOfKind is the resource (not a subresource) of kind among served.
func resourceOfKind(served []metav1.APIResource, kind string) (string, bool) {
	for _, r := range served {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			return r.Name, true
		}
	}
	return "", false
}

// namespacedResources lists the resources the server serves in namespaces,
// each once, at the first version that serves it with its group's preferred
// version first, as kubectl api-resources --namespaced lists them.
func (k *kube) namespacedResources(ctx context.Context) (map[schema.GroupVersion][]metav1.APIResource, error) {
	var core metav1.APIVersions
	if err := connect.GetDiscovery(ctx, k.raw, "/api", &core); err != nil {
		return nil, err
	}
	var groups metav1.APIGroupList
	if err := connect.GetDiscovery(ctx, k.raw, "/apis", &groups); err != nil {
		return nil, err
	}
	// Each group's versions, preferred first; the core group's are its own.
	byGroup := [][]string{core.Versions}
	for _, g := range groups.Groups {
		versions := []string{g.PreferredVersion.GroupVersion}
		for _, v := range g.Versions {
			if v.GroupVersion != g.PreferredVersion.GroupVersion {
				versions = append(versions, v.GroupVersion)
			}
		}
		byGroup = append(byGroup, versions)
	}
	found := map[schema.GroupVersion][]metav1.APIResource{}
	for _, versions := range byGroup {
		seen := map[string]bool{}
		for _, v := range versions {
			gv, err := schema.ParseGroupVersion(v)
			if err != nil {
				return nil, err
			}
			served, err := connect.ServedResources(ctx, k.raw, gv)
			if err != nil {
				return nil, fmt.Errorf("discover the resources of %s: %w", gv, err)
			}
			for _, r := range served {
				if r.Namespaced && !strings.Contains(r.Name, "/") && !seen[r.Name] {
					seen[r.Name] = true
					found[gv] = append(found[gv], r)
				}
			}
		}
	}
	return found, nil
}
