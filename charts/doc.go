// Package charts holds the Helm chart of widgethub (charts/widgethub) and
// its tests; it has no Go code of its own.
//
// The chart installs the hub as config/default does, with values for what
// platform teams change (image, replicas and sharding, the registration
// namespace, member and worker flags, ClusterProfile registration with its
// access provider file, extra volumes and init containers for an exec
// plugin, scheduling, metrics, a ServiceMonitor and a NetworkPolicy),
// checked by values.schema.json. Its CRDs are copies of
// config/crd/bases: `make manifests` writes them and `make verify` fails
// when they differ.
//
// The tests run the Helm CLI built from its Go module (hack/helm.sh; make
// test passes it as HELM): helm lint and helm template with the default
// values and with every value set (widgethub/ci/all-values.yaml); the
// rendered chart against config/default rendered by kustomize (same kinds,
// names, RBAC rules, container arguments and pod spec); the schema refusing
// wrong types; the ClusterProfile values (the provider file as the
// manager's loader reads it, its mount, the Role in another namespace
// against config/rbac's generated rules) and the docs' examples of them,
// the kustomize overlay of docs/install.md against the chart;
// and, on real hub API servers (envtest, internal/fleet), an install,
// upgrade and uninstall, and an install of docs/install.md's ClusterProfile
// examples whose manager, run as its ServiceAccount with the installed
// arguments, engages a ClusterProfile's member.
package charts
