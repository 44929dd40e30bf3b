package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/widgethub/widgethub/api/registration"
)

type unjoinOptions struct {
	*globals
	member    memberFlags
	cleanup   bool
	keepToken bool
}

func unjoinCommand(g *globals) *cobra.Command {
	o := &unjoinOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "unjoin NAME (--member-kubeconfig FILE [--member-context CONTEXT] [--cleanup] | --keep-token)",
		Short: "Remove a member's registration from the hub and revoke its token",
		Long: `unjoin removes the member NAME from the hub. With the member admin's
credentials (--member-kubeconfig, --member-context) it first revokes the hub's
token: it deletes the Secret in the member's widgethub-system namespace that
the token is bound to. Then it deletes the registration Secret NAME on the hub:
the hub stops watching the member.

With --cleanup it also deletes what join created in the member: the
ClusterRoleBinding, the ClusterRole, the ServiceAccount, the admission policy
and the namespace widgethub-system if join created it. It keeps them while
another registration's token Secret is left (another hub uses them), and it
keeps the namespace while it holds objects join did not create. The Widget
CRD stays, and with it the member's Widgets.

--keep-token removes the registration without reaching the member, for a
member that is gone: the token stays valid until it expires.`,
		Example: `  kubectl widgethub unjoin alpha --member-kubeconfig alpha.kubeconfig
  kubectl widgethub unjoin beta --cleanup --member-context kind-beta
  kubectl widgethub unjoin gamma --keep-token`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.cleanup, "cleanup", false, "Also delete the ServiceAccount, RBAC and admission policy that join created in the member.")
	f.BoolVar(&o.keepToken, "keep-token", false, "Do not reach the member: remove the registration only; its token stays valid until it expires.")
	o.member.addFlags(f, "")
	return cmd
}

func (o *unjoinOptions) validate() error {
	switch {
	case o.keepToken && (o.cleanup || o.member.set()):
		return withCode(ExitUsage, "--keep-token does not reach the member: it takes no --cleanup, --member-kubeconfig or --member-context")
	case !o.keepToken && !o.member.set():
		return withCode(ExitUsage, "unjoin revokes the hub's token in the member and needs the member admin's credentials: "+
			"pass --member-kubeconfig and/or --member-context (or --keep-token for a member that is gone)")
	}
	return nil
}

func (o *unjoinOptions) run(ctx context.Context, name string) error {
	if err := o.validate(); err != nil {
		return err
	}
	hub, err := o.loadHub()
	if err != nil {
		return err
	}
	var member *cluster
	if !o.keepToken {
		if member, err = o.loadMember(name, o.member); err != nil {
			return err
		}
	}
	secret, err := o.registration(ctx, hub, name)
	if err != nil {
		return err
	}
	if secret != nil {
		// Revoke first: a failure leaves the registration in place, so that
		// unjoin can be run again and still find the token's Secret.
		if err := o.revoke(ctx, member, secret); err != nil {
			return err
		}
		if err := o.deleteRegistration(ctx, hub, secret); err != nil {
			return err
		}
	}
	if !o.cleanup {
		return nil
	}
	if err := cleanupMember(ctx, member, o.stdout); err != nil {
		return fmt.Errorf("%s: %w", member.role, err)
	}
	fmt.Fprintf(o.stdout, "%s: kept the Widget CRD %s and its Widgets (kubectl delete crd %s removes both)\n", member.role, WidgetCRDName, WidgetCRDName)
	return nil
}

// registration returns the registration Secret NAME, or nil when there is
// none and --cleanup still has work to do.
func (o *unjoinOptions) registration(ctx context.Context, hub *cluster, name string) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: o.registrationNamespace, Name: name}
	secret := &corev1.Secret{}
	err := hub.client.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err) && !o.cleanup:
		return nil, withCode(ExitNotFound, "%q is not registered on the hub (no Secret %s)", name, key)
	case apierrors.IsNotFound(err):
		fmt.Fprintf(o.stdout, "hub: %q is not registered (no Secret %s)\n", name, key)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("hub: get Secret %s: %w", key, err)
	case secret.Labels[registration.SecretLabel] != "true":
		return nil, notARegistration(secret, "unjoin deletes only registrations, and left it and the member as they are")
	}
	return secret, nil
}

// revoke deletes the Secret the registration's token is bound to, or says
// why the token stays valid.
func (o *unjoinOptions) revoke(ctx context.Context, member *cluster, secret *corev1.Secret) error {
	bound := secret.Annotations[TokenSecretAnnotation]
	switch {
	case member == nil:
		fmt.Fprintf(o.stdout, "hub: --keep-token: the token of %q stays valid in the member until it expires (%s)\n", secret.Name, expiryOf(secret))
		return nil
	case bound == "":
		fmt.Fprintf(o.stdout, "%s: the token of %q is bound to no Secret of its own (registered by hand or by an older join): "+
			"it stays valid until it expires (%s), or until the ServiceAccount is deleted (--cleanup)\n", member.role, secret.Name, expiryOf(secret))
		return nil
	}
	return revokeToken(ctx, member, bound, o.stdout)
}

func (o *unjoinOptions) deleteRegistration(ctx context.Context, hub *cluster, secret *corev1.Secret) error {
	key := keyOf(secret)
	if err := hub.client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("hub: delete Secret %s: %w", key, err)
	}
	fmt.Fprintf(o.stdout, "hub: deleted registration Secret %s; the hub stops watching %q\n", key, secret.Name)
	return nil
}
