// Package metrics declares widgethub's per-member Prometheus metrics, all
// labelled by cluster and registered with controller-runtime's registry (so
// they are served on the manager's metrics endpoint). Forget removes a
// member's series when it is unregistered, so that members coming and going
// do not grow the registry.
package metrics
