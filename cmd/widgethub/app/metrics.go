package app

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// With --metrics-secure the metrics server asks the hub who calls /metrics
// (TokenReview) and whether that caller may get it (SubjectAccessReview).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions are the metrics server's options for opts. Secure, it
// serves HTTPS with controller-runtime's self-signed certificate (made at
// start, in memory) and lets through only the callers the hub authenticates
// and authorizes for a get on the non-resource URL /metrics; otherwise plain
// HTTP to anyone, for local runs.
func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if !opts.MetricsSecure {
		return o
	}
	o.SecureServing = true
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	// HTTP/1.1 only, as kubebuilder v4 serves metrics: HTTP/2 servers are
	// exposed to stream-reset floods (CVE-2023-44487, CVE-2023-39325), and a
	// scraper gains nothing from it.
	o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return o
}
