// Package kubeconfig is the registration source of kubeconfig Secrets: a
// Secret in the registration namespace labelled widgethub.io/kubeconfig=true
// registers one member, named after the Secret, with the kubeconfig in its
// "kubeconfig" key. Those names, the annotations read here and NewSecret are
// the registration contract of package api/registration, which the tools
// that write registrations share without linking this source.
//
// Source turns such a Secret into a members.Registration: the Secret owns
// the member's MemberCluster and receives its Events, the SHA-256 of the
// kubeconfig tells a changed registration, and Config makes the member's
// config with connect.RESTConfig, refusing credential plugins (unless
// allowed), files of the hub, proxies, impersonation and skipped TLS
// verification. Engaging, probing, sharding, status and metrics are package
// members'. The hub cache is scoped to that namespace and label
// (CacheOptions): the hub reads no other Secret. A Secret that kubectl widgethub join wrote and marked with
// widgethub.io/renew-token=true has its token renewed by the hub: the
// source writes the renewed token into its kubeconfig (renew.go), and only
// the token changes.
package kubeconfig
