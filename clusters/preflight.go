package clusters

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Version asks the member's API server for its version. It is the health
// probe: cheap, served to any authenticated client, bounded by ctx.
func (m *Member) Version(ctx context.Context) (string, error) {
	rc, err := rest.UnversionedRESTClientForConfigAndClient(m.versionConfig(), m.httpClient)
	if err != nil {
		return "", err
	}
	raw, err := rc.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	var info version.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", fmt.Errorf("decode /version: %w", err)
	}
	return info.GitVersion, nil
}

func (m *Member) versionConfig() *rest.Config {
	cfg := rest.CopyConfig(m.GetConfig())
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return cfg
}

// Preflight checks, before any cache starts, that the member answers, serves
// the kinds of objs (else ErrKindMissing) and lets the operator list them.
// It returns the member's version. Errors from the API server keep their
// type, so callers can tell 401 and 403 apart with apierrors.
func (m *Member) Preflight(ctx context.Context, objs ...client.Object) (string, error) {
	v, err := m.Version(ctx)
	if err != nil {
		return "", err
	}
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, m.GetScheme())
		if err != nil {
			return v, err
		}
		if _, err := m.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return v, fmt.Errorf("%w: %s", ErrKindMissing, gvk.GroupKind())
			}
			return v, fmt.Errorf("discover %s: %w", gvk.GroupKind(), err)
		}
		list, err := m.GetScheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			return v, err
		}
		if err := m.GetAPIReader().List(ctx, list.(client.ObjectList), client.Limit(1)); err != nil {
			return v, fmt.Errorf("list %s: %w", gvk.GroupKind(), err)
		}
	}
	return v, nil
}
