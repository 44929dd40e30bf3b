package clusters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ErrNotReady is wrapped when the member's API server answers but is not ready
// yet (its /readyz fails), e.g. while it restarts and before it serves its CRDs
// and RBAC: a missing kind or a 403 seen then would be a false diagnosis.
var ErrNotReady = errors.New("API server not ready")

// Version asks the member's API server for its version. It is the health
// probe: cheap, served to any authenticated client, bounded by ctx.
func (m *Member) Version(ctx context.Context) (string, error) {
	rc, err := m.unversionedClient()
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

func (m *Member) unversionedClient() (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(m.GetConfig())
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return rest.UnversionedRESTClientForConfigAndClient(cfg, m.httpClient)
}

// ready fails with ErrNotReady (wrapping the API server's answer, so 401 and
// 403 stay recognisable) unless the member's /readyz passes.
func (m *Member) ready(ctx context.Context) error {
	rc, err := m.unversionedClient()
	if err != nil {
		return err
	}
	if err := rc.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return fmt.Errorf("%w (/readyz): %w", ErrNotReady, err)
	}
	return nil
}

// Preflight checks, before any cache starts, that the member answers and is
// ready (else ErrNotReady), serves the kinds of objs (else ErrKindMissing) and
// lets the operator list them.
// It returns the member's version. Errors from the API server keep their
// type, so callers can tell 401 and 403 apart with apierrors.
func (m *Member) Preflight(ctx context.Context, objs ...client.Object) (string, error) {
	v, err := m.Version(ctx)
	if err != nil {
		return "", err
	}
	if err := m.ready(ctx); err != nil {
		return v, err
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
