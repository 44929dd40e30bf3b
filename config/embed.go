// Package config holds the project's generated manifests, embedded so that
// programs install exactly what controller-gen wrote: the kubectl plugin puts
// the Widget CRD, the member ClusterRole and the member admission policies into
// a member when it joins, and the demo applies the sample Widgets.
package config

import (
	"embed"
	"io/fs"
)

// WidgetCRD is the Widget CustomResourceDefinition (crd/bases).
//
//go:embed crd/bases/widgethub.io_widgets.yaml
var WidgetCRD []byte

// MemberRole is the ClusterRole the hub needs in every member (member-rbac),
// generated from the Widget reconciler's RBAC markers.
//
//go:embed member-rbac/role.yaml
var MemberRole []byte

// MemberAdmissionPolicy is the ValidatingAdmissionPolicy and its binding that
// fence the hub's ServiceAccount in every member (member-rbac, written by
// hand): it may write only the Deployments the Widget reconciler writes
// (Widget-owned, of its shape, updates only of its own), none in kube-system.
//
//go:embed member-rbac/admission-policy.yaml
var MemberAdmissionPolicy []byte

// MemberTokenPolicy is the ValidatingAdmissionPolicy and its binding that
// fence the tokens the hub's ServiceAccount may request in a member
// (member-rbac, written by hand): only tokens bound to a Secret join made.
//
//go:embed member-rbac/token-policy.yaml
var MemberTokenPolicy []byte

//go:embed samples/widgethub_*.yaml
var samples embed.FS

// Samples returns the sample Widget manifests of samples/, by file name.
func Samples() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(samples, "samples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := samples.ReadFile(path)
		out[d.Name()] = data
		return err
	})
	return out, err
}
