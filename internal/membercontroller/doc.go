// Package membercontroller is a controller whose sources are engaged on each
// member cluster and feed one shared workqueue of mcreconcile.Requests.
//
// It plays the part of multicluster-runtime's controller (and uses its
// per-cluster sources and handlers) with two differences that matter for an
// operator whose members come and go: an engagement leaves no goroutine behind
// once its context ends (multicluster-runtime v0.24.1 keeps one goroutine per
// source and engagement until the whole controller stops), and engaging one
// member does not hold a lock while that member's sources start, so a slow
// member cannot delay another's engagement.
package membercontroller
