package clusters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// Bounds of the answers to a preflight's and a probe's requests, counted
// after decompression (connect bounds every other answer).
const (
	// MaxVersionBytes bounds the answer to /version (about 400 bytes from a
	// real API server) and MaxVersionLength the gitVersion taken from it.
	MaxVersionBytes  = 4 << 10
	MaxVersionLength = 64
	// maxReadyzBytes bounds the answer to /readyz ("ok", or its checks).
	maxReadyzBytes = 64 << 10
	// maxOneObjectListBytes bounds the answer to the probe's list of one
	// object: the largest object an API server stores (etcd takes requests
	// of at most 1.5 MiB, kube-apiserver bodies of at most 3 MiB) and its
	// list's envelope. An endless list answered to it under the answer
	// bound cost a replica 223 MiB of RSS at every probe.
	maxOneObjectListBytes = 4 << 20
)

// ErrNotReady is wrapped when the member's API server answers but is not ready
// yet (its /readyz fails), e.g. while it restarts and before it serves its CRDs
// and RBAC: a missing kind or a 403 seen then would be a false diagnosis.
var ErrNotReady = errors.New("API server not ready")

// Version asks the member's API server for its version. It is the health
// probe: cheap, served to any authenticated client, bounded by ctx. An
// answer over MaxVersionBytes fails with ErrResponseTooLarge; the version is
// cut to MaxVersionLength bytes.
func (m *Member) Version(ctx context.Context) (string, error) {
	rc, err := m.unversionedClient()
	if err != nil {
		return "", err
	}
	raw, err := rc.Get().AbsPath("/version").Do(probeContext(ctx, MaxVersionBytes)).Raw()
	if err != nil {
		return "", err
	}
	var info version.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", fmt.Errorf("decode /version: %w", err)
	}
	return v1alpha1.Cut(info.GitVersion, MaxVersionLength), nil
}

type probeKey struct{}

// probeContext marks the requests made with it as the probe's own, whose
// refusals the probe reports itself (see Member.noteRefusal), and bounds
// their answers to limit bytes.
func probeContext(ctx context.Context, limit int64) context.Context {
	return connect.WithResponseLimit(context.WithValue(ctx, probeKey{}, true), limit)
}

func isProbe(req *http.Request) bool {
	probe, _ := req.Context().Value(probeKey{}).(bool)
	return probe
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
	if err := rc.Get().AbsPath("/readyz").Do(probeContext(ctx, maxReadyzBytes)).Error(); err != nil {
		return fmt.Errorf("%w (/readyz): %w", ErrNotReady, err)
	}
	return nil
}

// Preflight checks, before any cache starts and then as the health probe,
// that the member answers and is ready (else ErrNotReady), serves the kinds
// of objs (else ErrKindMissing, also when listing them answers 404) and lets
// the operator list them. Each step (version, readiness, each list) is
// bounded by stepTimeout on its own; discovery is bounded by the member's
// request timeout. Last, it fails with the latest answer of the member that
// was refused since the previous Preflight (ErrResponseTooLarge,
// ErrRedirectRefused), in a watch or any other request. It returns the
// member's version. Errors from the API server keep their type, so callers
// can tell 401 and 403 apart with apierrors.
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
			return m.GetAPIReader().List(probeContext(ctx, maxOneObjectListBytes), list.(client.ObjectList), client.Limit(1))
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
	if err := m.takeRefusal(); err != nil {
		return v, fmt.Errorf("an answer was refused since the last probe: %w", err)
	}
	return v, nil
}
