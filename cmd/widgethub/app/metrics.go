package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// With --metrics-secure the metrics server asks the hub who calls /metrics
// (TokenReview) and whether that caller may get it (SubjectAccessReview).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The files of --metrics-cert-path, named as a kubernetes.io/tls Secret names them.
const (
	metricsCertName = "tls.crt"
	metricsKeyName  = "tls.key"
)

// metricsOptions are the metrics server's options for opts. Secure, it
// serves HTTPS and lets through only the callers the hub authenticates and
// authorizes for a get on the non-resource URL /metrics, with the
// certificate of --metrics-cert-path (reloaded when its files change) or
// else controller-runtime's self-signed one (made at start, in memory);
// otherwise plain HTTP to anyone, for local runs.
func metricsOptions(opts Options) (metricsserver.Options, error) {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if !opts.MetricsSecure {
		if opts.MetricsCertPath != "" {
			return o, errors.New("--metrics-cert-path needs --metrics-secure")
		}
		return o, nil
	}
	o.SecureServing = true
	if opts.MetricsCertPath != "" {
		// controller-runtime serves the self-signed certificate when either
		// file is missing: a certificate asked for and not found is an error.
		for _, name := range []string{metricsCertName, metricsKeyName} {
			if _, err := os.Stat(filepath.Join(opts.MetricsCertPath, name)); err != nil {
				return o, fmt.Errorf("--metrics-cert-path: %w", err)
			}
		}
		o.CertDir, o.CertName, o.KeyName = opts.MetricsCertPath, metricsCertName, metricsKeyName
	}
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	// HTTP/1.1 only, as kubebuilder v4 serves metrics: HTTP/2 servers are
	// exposed to stream-reset floods (CVE-2023-44487, CVE-2023-39325), and a
	// scraper gains nothing from it.
	o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return o, nil
}
