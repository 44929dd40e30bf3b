package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// kindFromContext is the value of a bare --kind: take the kind cluster's
// name from a "kind-NAME" member context, else use the join NAME.
const kindFromContext = "<from context>"

type joinOptions struct {
	*globals
	member       memberFlags
	server, kind string
	overwrite    bool
	adopt        bool
	tokenTTL     time.Duration
}

func joinCommand(g *globals) *cobra.Command {
	o := &joinOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "join NAME --member-kubeconfig FILE [--member-context CONTEXT] [--server URL | --kind[=CLUSTER]]",
		Short: "Register a member cluster with the hub",
		Long: `join makes NAME a member of the hub, with the member admin's credentials:

  1. installs the Widget CRD in the member;
  2. installs the ValidatingAdmissionPolicy widgethub-member there (the hub may
     write only the Deployments the Widget reconciler writes: Widget-owned,
     one unprivileged container, none in kube-system), creates
     the ServiceAccount widgethub-system/widgethub-member, and the ClusterRole
     and ClusterRoleBinding widgethub-member: Widgets and their status,
     Deployments, Events and API discovery, nothing more; and the Role and
     RoleBinding widgethub-system/widgethub-member: create a token of that
     ServiceAccount, of no other;
  3. creates a Secret widgethub-member-token-XXXXX in widgethub-system there
     and mints a token for the ServiceAccount bound to it (TokenRequest API,
     --token-ttl): deleting that Secret revokes this token and every renewal
     of it, and no other;
  4. creates the registration Secret NAME on the hub: a kubeconfig with that
     token and the member's CA, labelled widgethub.io/kubeconfig=true and
     annotated widgethub.io/renew-token=true: the hub renews the token itself
     before it expires (with the same lifetime, bound to the same Secret);
  5. with --overwrite, then revokes the token of the registration it replaced.
     --overwrite replaces only a registration: a Secret NAME without the label
     widgethub.io/kubeconfig=true is left alone (exit 7).

join takes over no ServiceAccount, ClusterRole, ClusterRoleBinding, Role,
RoleBinding or admission policies of those names that it did not create
(exit 7) unless --adopt is given.

The hub's manager must reach the member at the kubeconfig's server address.
For a kind member that address is 127.0.0.1 on your machine, which a pod on
the hub cannot reach: pass --kind (https://CLUSTER-control-plane:6443, the
address inside kind's Docker network) or --server.`,
		Example: `  kubectl widgethub join alpha --member-kubeconfig alpha.kubeconfig
  kubectl widgethub join beta --member-context kind-beta --kind
  kubectl widgethub join gamma --member-context gamma --server https://10.0.0.7:6443 --overwrite`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	o.member.addFlags(f, "")
	f.StringVar(&o.server, "server", "", "API server address the hub uses to reach the member (default: the member kubeconfig's server).")
	f.StringVar(&o.kind, "kind", "", "The member is a kind cluster: the hub reaches it at https://CLUSTER-control-plane:6443 (CLUSTER from a kind-CLUSTER context, else NAME).")
	f.Lookup("kind").NoOptDefVal = kindFromContext
	f.BoolVar(&o.overwrite, "overwrite", false, "Replace an existing registration of NAME (a Secret labelled widgethub.io/kubeconfig=true; join replaces no other Secret).")
	f.BoolVar(&o.adopt, "adopt", false, "Take over a ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding or admission policies of join's names that join did not create: join updates it and unjoin --cleanup deletes it.")
	f.DurationVar(&o.tokenTTL, "token-ttl", DefaultTokenTTL, "Requested lifetime of the hub's token (at least 10m); the hub renews it, with this lifetime, when half of it is left.")
	return cmd
}

func (o *joinOptions) run(ctx context.Context, name string) error {
	if err := o.validate(); err != nil {
		return err
	}
	j, err := o.preflight(ctx, name)
	if err != nil {
		return err
	}
	if err := o.installInMember(ctx, j); err != nil {
		return err
	}
	token, err := o.mint(ctx, j)
	if err != nil {
		return err
	}
	if err := o.registerOnHub(ctx, j, token); err != nil {
		// The new token is registered nowhere: it must not outlive this run.
		if rerr := revokeToken(ctx, j.member, j.tokenSecret, o.stdout); rerr != nil {
			return fmt.Errorf("%w (and revoking the new token failed: %v)", err, rerr)
		}
		if j.existing == nil {
			return fmt.Errorf("%w; the new token is revoked, and what join installed in the member stays (unjoin %s --cleanup removes it)", err, j.name)
		}
		return err
	}
	if err := o.revokeReplaced(ctx, j); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "Check it with: kubectl widgethub clusters\n")
	return nil
}

// validate checks the flags before any cluster is contacted.
func (o *joinOptions) validate() error {
	if !o.member.set() {
		return withCode(ExitUsage, "join needs the member: pass --member-kubeconfig and/or --member-context")
	}
	if o.server != "" && o.kind != "" {
		return withCode(ExitUsage, "--server and --kind both set the member's address: pass one")
	}
	if o.tokenTTL < 10*time.Minute {
		return withCode(ExitUsage, "--token-ttl %s is shorter than the API server's minimum of 10m", o.tokenTTL)
	}
	return nil
}

// joining is what preflight found: both clusters, answering, and the
// registration that join replaces (nil when NAME is new).
type joining struct {
	name        string
	hub, member *cluster
	// server is the address the hub will use for the member.
	server   string
	existing *corev1.Secret
	// tokenSecret is the Secret in the member that the new token is bound to.
	tokenSecret string
}

// preflight checks, before anything is written, that both clusters answer,
// that the registration namespace exists on the hub and that NAME is free
// (or --overwrite is set and the Secret NAME is a registration: labelled
// widgethub.io/kubeconfig=true; any other Secret is never replaced).
func (o *joinOptions) preflight(ctx context.Context, name string) (*joining, error) {
	hub, err := o.loadHub()
	if err != nil {
		return nil, err
	}
	member, err := o.loadMember(name, o.member)
	if err != nil {
		return nil, err
	}
	if member.config.Insecure {
		return nil, withCode(ExitKubeconfig, "%s: the member kubeconfig skips TLS verification (insecure-skip-tls-verify), which the hub refuses: "+
			"give it the member's CA (certificate-authority or certificate-authority-data)", member.role)
	}
	existing, err := o.registration(ctx, hub, name)
	if err != nil {
		return nil, err
	}
	if existing != nil && existing.Labels[registration.SecretLabel] != "true" {
		return nil, notARegistration(existing, "join replaces only registrations, with --overwrite too; delete or rename that Secret, or choose another NAME")
	}
	if existing != nil && !o.overwrite {
		return nil, withCode(ExitExists, "%q is already registered on the hub (Secret %s/%s); pass --overwrite to replace it",
			name, o.registrationNamespace, name)
	}
	if err := o.checkOwnership(ctx, member); err != nil {
		return nil, err
	}
	return &joining{name: name, hub: hub, member: member, server: o.memberServer(name, member), existing: existing}, nil
}

// checkOwnership refuses to take over objects of join's names that join did
// not create, unless --adopt.
func (o *joinOptions) checkOwnership(ctx context.Context, member *cluster) error {
	unowned, err := unownedObjects(ctx, member.client)
	if err != nil {
		return fmt.Errorf("%s: %w", member.role, err)
	}
	if len(unowned) == 0 {
		return nil
	}
	if !o.adopt {
		return withCode(ExitConflict, "%s: %s already exist(s) and kubectl widgethub join did not create it (no label %s=%s): "+
			"join would change it and unjoin --cleanup would delete it; delete or rename it, or pass --adopt to take it over",
			member.role, strings.Join(unowned, ", "), managedByLabel, fieldManager)
	}
	fmt.Fprintf(o.stderr, "warning: %s: adopting %s: join labels and updates it, and unjoin --cleanup will delete it\n",
		member.role, strings.Join(unowned, ", "))
	return nil
}

// installInMember installs the Widget CRD, the namespace, the admission
// policy, the ServiceAccount and its RBAC in the member.
func (o *joinOptions) installInMember(ctx context.Context, j *joining) error {
	out, m := o.stdout, j.member
	fmt.Fprintf(out, "%s: joining context %q (%s), Kubernetes %s\n", m.role, m.context, m.config.Host,
		v1alpha1.Printable(m.version, v1alpha1.MaxVersionLength))
	if err := installCRD(ctx, m.client); err != nil {
		return fmt.Errorf("%s: %w", m.role, err)
	}
	fmt.Fprintf(out, "%s: Widget CRD %s installed\n", m.role, WidgetCRDName)
	created, err := ensureNamespace(ctx, m.client)
	if err != nil {
		return fmt.Errorf("%s: %w", m.role, err)
	}
	if created {
		fmt.Fprintf(out, "%s: namespace %s created\n", m.role, MemberNamespace)
	}
	objs, err := memberObjects()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := m.client.Apply(ctx, obj); err != nil {
			return fmt.Errorf("%s: apply %T %s: %w", m.role, obj, obj.GetName(), err)
		}
	}
	fmt.Fprintf(out, "%s: ValidatingAdmissionPolicies and bindings %s and %s, ServiceAccount %s/%s, ClusterRole and ClusterRoleBinding %s, Role and RoleBinding %s/%s applied\n",
		m.role, MemberAdmissionPolicy, MemberTokenPolicy, MemberNamespace, MemberServiceAccount, MemberClusterRole, MemberNamespace, MemberClusterRole)
	return nil
}

// mint creates the registration's token Secret in the member and mints the
// hub's token bound to it.
func (o *joinOptions) mint(ctx context.Context, j *joining) (token string, err error) {
	m := j.member
	bound, err := createTokenSecret(ctx, m.client, o.registrationNamespace+"/"+j.name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.role, err)
	}
	j.tokenSecret = bound.Name
	token, expires, err := mintToken(ctx, m.client, o.tokenTTL, bound)
	if err != nil {
		if rerr := revokeToken(ctx, m, bound.Name, io.Discard); rerr != nil {
			return "", fmt.Errorf("%s: %w (and deleting Secret %s/%s failed: %v)", m.role, err, MemberNamespace, bound.Name, rerr)
		}
		return "", fmt.Errorf("%s: %w", m.role, err)
	}
	fmt.Fprintf(o.stdout, "%s: token minted for the hub, bound to Secret %s/%s, valid until %s\n",
		m.role, MemberNamespace, bound.Name, expires.UTC().Format(time.RFC3339))
	return token, nil
}

// registerOnHub builds the registration kubeconfig, checks that its token can
// list Widgets in the member, and writes the registration Secret.
func (o *joinOptions) registerOnHub(ctx context.Context, j *joining, token string) error {
	doc, err := registrationKubeconfig(j.name, j.member.config, j.server, token)
	if err != nil {
		return fmt.Errorf("%s: build the registration kubeconfig: %w", j.member.role, err)
	}
	if err := verify(ctx, doc, j.member.config.Host, o.requestTimeout); err != nil {
		return fmt.Errorf("%s: the new credentials do not work yet, nothing was registered on the hub: %w", j.member.role, err)
	}
	if err := o.register(ctx, j, doc); err != nil {
		return err
	}
	verb := "registered"
	if j.existing != nil {
		verb = "re-registered"
	}
	fmt.Fprintf(o.stdout, "hub: %s %q as Secret %s/%s; the hub reaches it at %s\n", verb, j.name, o.registrationNamespace, j.name, j.server)
	return nil
}

// revokeReplaced revokes the token of the registration join replaced, once
// the new one is in place.
func (o *joinOptions) revokeReplaced(ctx context.Context, j *joining) error {
	if j.existing == nil {
		return nil
	}
	prev := j.existing.Annotations[TokenSecretAnnotation]
	if prev == "" {
		fmt.Fprintf(o.stdout, "%s: the replaced token was bound to no Secret of its own (registered by hand or by an older join): "+
			"it stays valid until it expires (%s), or until unjoin --cleanup deletes the ServiceAccount\n", j.member.role, expiryOf(j.existing))
		return nil
	}
	if err := revokeToken(ctx, j.member, prev, o.stdout); err != nil {
		return fmt.Errorf("%q is re-registered, but its previous token is not revoked: %w", j.name, err)
	}
	return nil
}

// memberServer is the address the hub will use for the member.
func (o *joinOptions) memberServer(name string, member *cluster) string {
	switch {
	case o.server != "":
		return o.server
	case o.kind == kindFromContext:
		kindName := name
		if n, ok := strings.CutPrefix(member.context, "kind-"); ok && n != "" {
			kindName = n
		}
		return "https://" + kindName + "-control-plane:6443"
	case o.kind != "":
		return "https://" + o.kind + "-control-plane:6443"
	}
	return member.config.Host
}

// registration returns the hub's registration Secret of name, or nil.
func (o *joinOptions) registration(ctx context.Context, hub *cluster, name string) (*corev1.Secret, error) {
	ns := &corev1.Namespace{}
	err := hub.client.Get(ctx, types.NamespacedName{Name: o.registrationNamespace}, ns)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("hub: the registration namespace %q does not exist: install widgethub on the hub first (make deploy), or pass --registration-namespace",
			o.registrationNamespace)
	}
	// Forbidden to read namespaces is fine: the Secret request below tells.
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("hub: get namespace %s: %w", o.registrationNamespace, err)
	}
	secret := &corev1.Secret{}
	err = hub.client.Get(ctx, types.NamespacedName{Namespace: o.registrationNamespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hub: get Secret %s/%s: %w", o.registrationNamespace, name, err)
	}
	return secret, nil
}

// notARegistration is the ExitConflict error of join and unjoin about the
// hub's Secret s, which is not a registration: they leave it alone; what
// says what to do.
func notARegistration(s *corev1.Secret, what string) error {
	return withCode(ExitConflict, "hub: Secret %s/%s exists and is not a widgethub registration (no label %s=true): %s",
		s.Namespace, s.Name, registration.SecretLabel, what)
}

// register creates the registration Secret, or replaces the kubeconfig of
// the existing one; either names the new token's Secret in an annotation.
func (o *joinOptions) register(ctx context.Context, j *joining, doc []byte) error {
	want := registration.NewSecret(o.registrationNamespace, j.name, doc)
	want.Annotations = map[string]string{TokenSecretAnnotation: j.tokenSecret, registration.RenewTokenAnnotation: "true"}
	if j.existing == nil {
		err := j.hub.client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return withCode(ExitExists, "%q was registered on the hub by someone else meanwhile; pass --overwrite to replace it", j.name)
		}
		if err != nil {
			return fmt.Errorf("hub: create Secret %s/%s: %w", o.registrationNamespace, j.name, err)
		}
		return nil
	}
	s := j.existing.DeepCopy()
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Labels[registration.SecretLabel] = "true"
	s.Annotations[TokenSecretAnnotation] = j.tokenSecret
	s.Annotations[registration.RenewTokenAnnotation] = "true"
	s.Data = want.Data
	if err := j.hub.client.Update(ctx, s); err != nil {
		return fmt.Errorf("hub: update Secret %s/%s: %w", o.registrationNamespace, j.name, err)
	}
	return nil
}

// registrationKubeconfig is the kubeconfig the hub uses for the member: one
// context named after the member, the member's CA, the server the hub reaches
// and the ServiceAccount token.
func registrationKubeconfig(name string, member *rest.Config, server, token string) ([]byte, error) {
	tls := rest.CopyConfig(member)
	if err := rest.LoadTLSFiles(tls); err != nil {
		return nil, fmt.Errorf("read the member's CA: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: tls.CAData,
		TLSServerName:            tls.ServerName,
		InsecureSkipTLSVerify:    tls.Insecure,
	}
	cfg.AuthInfos[MemberServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: MemberServiceAccount}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}

// verify checks the registration kubeconfig as the hub will read it
// (connect.RESTConfig) at reachable, the member address that works from
// here: its token lists Widgets, and the admission policy refuses it a
// Deployment in kube-system. RBAC, CRD discovery and admission policies take
// effect within moments of being written, so it retries briefly.
func verify(ctx context.Context, doc []byte, reachable string, timeout time.Duration) error {
	cfg, err := connect.RESTConfig(doc, connect.ConfigOptions{UserAgent: userAgent})
	if err != nil {
		return err
	}
	cfg.REST.Host = reachable
	cfg.REST.Timeout = timeout
	c, err := newKube(cfg.REST)
	if err != nil {
		return err
	}
	err = retry(ctx, "list Widgets with the minted token", func() (bool, error) {
		err := c.List(ctx, &v1alpha1.WidgetList{}, listOptions{limit: 1})
		// Not yet authorized or not yet discovered: try again.
		return err == nil, transient(err, apierrors.IsForbidden(err) || meta.IsNoMatchError(err))
	})
	if err != nil {
		return err
	}
	return retry(ctx, "the admission policy "+MemberAdmissionPolicy+" to refuse the token a Deployment in kube-system", func() (bool, error) {
		switch err := c.Create(ctx, fenceProbe(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); {
		case err == nil:
			// Not enforced yet, or never: said if it stays so.
			return false, transientError{errPolicyNotEnforced}
		case isPolicyDenial(err):
			return true, nil
		default:
			return false, err
		}
	})
}

// errPolicyNotEnforced is why join fails on a member that serves
// ValidatingAdmissionPolicies and does not enforce them: the hub's token
// would not be fenced.
var errPolicyNotEnforced = errors.New("the member admitted a dry run of that Deployment: it serves ValidatingAdmissionPolicy but does not enforce it " +
	"(does its API server run without the ValidatingAdmissionPolicy admission plugin?), so the hub's token would not be fenced")

// retry calls try until it is done, fails or 20 seconds pass. try returns
// (done, nil), or a transient error that is retried, or a permanent one.
func retry(ctx context.Context, what string, try func() (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		done, err := try()
		var t transientError
		if errors.As(err, &t) {
			last = t.err
			return false, nil
		}
		return done, err
	})
	switch {
	case err != nil && last != nil:
		return fmt.Errorf("waiting for %s: %w", what, last)
	case err != nil:
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// transientError marks an error retry tries again after.
type transientError struct{ err error }

func (t transientError) Error() string { return t.err.Error() }

// transient is err marked transient when retryable, err when not, nil for nil.
func transient(err error, retryable bool) error {
	if err != nil && retryable {
		return transientError{err}
	}
	return err
}

// fenceProbe is a valid Deployment the member's admission policy must refuse
// the hub: it is in kube-system and no Widget's child.
func fenceProbe() *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "widgethub-join-probe"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "widgethub-join-probe", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// isPolicyDenial reports whether err is the member admission policy refusing a request.
func isPolicyDenial(err error) bool {
	msg := err.Error()
	return apierrors.IsForbidden(err) && strings.Contains(msg, "ValidatingAdmissionPolicy '"+MemberAdmissionPolicy+"'") &&
		strings.Contains(msg, "denied request")
}
