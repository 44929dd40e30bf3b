// Package registration is the registration contract between the hub and
// everything that writes or reads its registration Secrets: the names, keys
// and annotations that a user, kubectl widgethub, the bench and the demo
// write, and that the Secret source (providers/kubeconfig) reads for the
// engine.
//
// A member is registered by a Secret in the registration namespace
// (DefaultNamespace unless the manager's --registration-namespace says
// otherwise) labelled SecretLabel=true, named after the member, with a
// kubeconfig in its SecretKey data key; NewSecret builds one. Annotations on
// that Secret say more:
//
//   - TokenSecretAnnotation names the Secret on the member that the
//     kubeconfig's token is bound to (kubectl widgethub join writes it);
//   - RenewTokenAnnotation="true" lets the hub renew that token and rewrite
//     the kubeconfig with the new one;
//   - PinAnnotation names the replica of a sharded hub that should serve the
//     member while it is live.
//
// The package sits below everything that uses it and imports only k8s.io/api
// and k8s.io/apimachinery, so that a tool writing registrations links neither
// the engine nor multicluster-runtime (hack/verify-plugin-deps.sh checks
// kubectl widgethub).
package registration
