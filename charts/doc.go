// Package charts holds the Helm chart of widgethub (charts/widgethub) and
// its tests; it has no Go code of its own.
//
// The chart installs the hub as config/default does, with values for what
// platform teams change (image, replicas and sharding, the registration
// namespace, member and worker flags, scheduling, metrics, a ServiceMonitor
// and a NetworkPolicy), checked by values.schema.json. Its CRDs are copies of
// config/crd/bases: `make manifests` writes them and `make verify` fails
// when they differ.
//
// The tests run the Helm CLI built from its Go module (hack/helm.sh; make
// test passes it as HELM): helm lint and helm template with the default
// values and with every value set (widgethub/ci/all-values.yaml); the
// rendered chart against config/default rendered by kustomize (same kinds,
// names, RBAC rules, container arguments and pod spec); the schema refusing
// wrong types; and an install, upgrade and uninstall on a real hub API
// server (envtest, internal/fleet).
package charts
