package clusters

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/widgethub/widgethub/clusters/connect"
)

// namespacedFirst is the member's RESTMapper: a groupVersionMapper that
// knows the kinds of byObject as namespaced without asking.
func namespacedFirst(c *rest.Config, hc *http.Client, scheme *runtime.Scheme, byObject map[client.Object]cache.ByObject) (meta.RESTMapper, error) {
	lazy, err := newGroupVersionMapper(c, hc, scheme)
	if err != nil {
		return nil, err
	}
	known := knownMapper{RESTMapper: lazy, static: meta.NewDefaultRESTMapper(nil)}
	for obj := range byObject {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		known.static.Add(gvk, meta.RESTScopeNamespace)
	}
	return known, nil
}

// knownMapper answers RESTMapping from static when it can, else from the
// RESTMapper it wraps.
type knownMapper struct {
	meta.RESTMapper
	static *meta.DefaultRESTMapper
}

func (k knownMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if m, err := k.static.RESTMapping(gk, versions...); err == nil {
		return m, nil
	}
	return k.RESTMapper.RESTMapping(gk, versions...)
}

// groupVersionMapper discovers a member's API one group version at a time,
// when first asked about it, and keeps only the kinds of that group version
// that its scheme knows. controller-runtime's dynamic RESTMapper instead
// loads every group the member serves at its first question (aggregated
// discovery): a quarter of the hub's heap per member. A question without a
// version is about the scheme's versions of the group. A group version the
// member does not serve is asked again next time (its CRD may come).
type groupVersionMapper struct {
	client *rest.RESTClient
	scheme *runtime.Scheme

	mu     sync.RWMutex
	known  map[schema.GroupVersion]bool
	mapper *meta.DefaultRESTMapper
}

func newGroupVersionMapper(c *rest.Config, hc *http.Client, scheme *runtime.Scheme) (*groupVersionMapper, error) {
	cfg := rest.CopyConfig(c)
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &groupVersionMapper{client: rc, scheme: scheme, known: map[schema.GroupVersion]bool{},
		mapper: meta.NewDefaultRESTMapper(nil)}, nil
}

// load discovers the group versions of group (those of the scheme when
// versions is empty) not yet known, and returns the versions asked about.
func (g *groupVersionMapper) load(group string, versions []string) ([]string, error) {
	if len(versions) == 0 || (len(versions) == 1 && versions[0] == "") {
		versions = nil
		for _, gv := range g.scheme.PrioritizedVersionsForGroup(group) {
			versions = append(versions, gv.Version)
		}
	}
	g.mu.RLock()
	missing := false
	for _, v := range versions {
		missing = missing || !g.known[schema.GroupVersion{Group: group, Version: v}]
	}
	g.mu.RUnlock()
	if !missing {
		return versions, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, v := range versions {
		gv := schema.GroupVersion{Group: group, Version: v}
		if g.known[gv] {
			continue
		}
		// Bounded, and without a resource whose name is not one path segment.
		resources, err := connect.ServedResources(context.Background(), g.client, gv)
		if apierrors.IsNotFound(err) {
			continue // not served (yet): the mapper answers no match
		}
		if err != nil {
			return nil, fmt.Errorf("discover %s: %w", gv, err)
		}
		g.add(gv, resources)
		g.known[gv] = true
	}
	return versions, nil
}

// add maps the resources of gv whose kinds the scheme knows, and their lists.
func (g *groupVersionMapper) add(gv schema.GroupVersion, resources []metav1.APIResource) {
	for _, r := range resources {
		gvk := gv.WithKind(r.Kind)
		if strings.Contains(r.Name, "/") || !g.scheme.Recognizes(gvk) {
			continue
		}
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		singular := r.SingularName
		if singular == "" {
			singular = strings.ToLower(r.Kind)
		}
		g.mapper.AddSpecific(gvk, gv.WithResource(r.Name), gv.WithResource(singular), scope)
		// As client-go's discovery mapper does: a cache asks about lists.
		g.mapper.Add(gv.WithKind(r.Kind+"List"), scope)
	}
}

func (g *groupVersionMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return mapping(g, gk, versions, g.mapper.RESTMapping)
}

func (g *groupVersionMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return mapping(g, gk, versions, g.mapper.RESTMappings)
}

// mapping loads the group versions of gk asked about (the scheme's when
// none) and then asks the mapper.
func mapping[T any](g *groupVersionMapper, gk schema.GroupKind, versions []string, ask func(schema.GroupKind, ...string) (T, error)) (T, error) {
	versions, err := g.load(gk.Group, versions)
	if err != nil {
		var zero T
		return zero, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return ask(gk, versions...)
}

// resource loads the group version of r (the scheme's when r has none)
// and then asks the mapper.
func resource[T any](g *groupVersionMapper, r schema.GroupVersionResource, ask func(schema.GroupVersionResource) (T, error)) (T, error) {
	if _, err := g.load(r.Group, []string{r.Version}); err != nil {
		var zero T
		return zero, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return ask(r)
}

func (g *groupVersionMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return resource(g, r, g.mapper.KindFor)
}

func (g *groupVersionMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return resource(g, r, g.mapper.KindsFor)
}

func (g *groupVersionMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return resource(g, r, g.mapper.ResourceFor)
}

func (g *groupVersionMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return resource(g, r, g.mapper.ResourcesFor)
}

func (g *groupVersionMapper) ResourceSingularizer(resource string) (string, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.mapper.ResourceSingularizer(resource)
}
