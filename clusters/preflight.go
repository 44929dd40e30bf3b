package clusters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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

// Preflight checks, before any cache starts and then as the health probe,
// that the member answers and is ready (else ErrNotReady), serves the kinds
// of objs (else ErrKindMissing, also when listing them answers 404) and lets
// the operator list them. Each step (version, readiness, each list) is
// bounded by stepTimeout on its own; discovery is bounded by the member's
// request timeout. It returns the member's version. Errors from the API server
// keep their type, so callers can tell 401 and 403 apart with apierrors.
func (m *Member) Preflight(ctx context.Context, stepTimeout time.Duration, objs ...client.Object) (string, error) {
	step := func(do func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, stepTimeout)
		defer cancel()
		return do(ctx)
	}
	var v string
	if err := step(func(ctx context.Context) (err error) { v, err = m.Version(ctx); return err }); err != nil {
		return "", err
	}
	if err := step(m.ready); err != nil {
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
		err = step(func(ctx context.Context) error {
			return m.GetAPIReader().List(ctx, list.(client.ObjectList), client.Limit(1))
		})
		switch {
		case apierrors.IsNotFound(err):
			// Discovery still knew the kind, but it is no longer served (its
			// CRD was deleted).
			return v, fmt.Errorf("%w: %s (list answered 404)", ErrKindMissing, gvk.GroupKind())
		case err != nil:
			return v, fmt.Errorf("list %s: %w", gvk.GroupKind(), err)
		}
	}
	return v, nil
}
