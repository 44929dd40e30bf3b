package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/providers/kubeconfig"
)

type unjoinOptions struct {
	*globals
	member  memberFlags
	cleanup bool
}

func unjoinCommand(g *globals) *cobra.Command {
	o := &unjoinOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "unjoin NAME [--cleanup --member-kubeconfig FILE [--member-context CONTEXT]]",
		Short: "Remove a member's registration from the hub",
		Long: `unjoin deletes the registration Secret NAME on the hub: the hub stops
watching the member. With --cleanup it also deletes, with the member admin's
credentials, what join created in the member: the ClusterRoleBinding, the
ClusterRole, the ServiceAccount (which revokes the hub's token) and the
namespace widgethub-system if join created it. The Widget CRD stays, and with
it the member's Widgets.`,
		Example: `  kubectl widgethub unjoin alpha
  kubectl widgethub unjoin beta --cleanup --member-context kind-beta`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.cleanup, "cleanup", false, "Also delete the ServiceAccount and RBAC that join created in the member.")
	o.member.addFlags(f, " Only with --cleanup.")
	return cmd
}

func (o *unjoinOptions) run(ctx context.Context, name string) error {
	if o.cleanup && !o.member.set() {
		return withCode(ExitUsage, "--cleanup needs the member admin's credentials: pass --member-kubeconfig and/or --member-context")
	}
	if !o.cleanup && o.member.set() {
		return withCode(ExitUsage, "--member-kubeconfig and --member-context are used only with --cleanup")
	}
	hub, err := o.loadHub()
	if err != nil {
		return err
	}
	var member *cluster
	if o.cleanup {
		if member, err = o.loadMember(name, o.member); err != nil {
			return err
		}
	}

	key := client.ObjectKey{Namespace: o.registrationNamespace, Name: name}
	secret := &corev1.Secret{}
	err = hub.client.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err) && !o.cleanup:
		return withCode(ExitNotFound, "%q is not registered on the hub (no Secret %s)", name, key)
	case apierrors.IsNotFound(err):
		fmt.Fprintf(o.stdout, "hub: %q is not registered (no Secret %s)\n", name, key)
	case err != nil:
		return fmt.Errorf("hub: get Secret %s: %w", key, err)
	case secret.Labels[kubeconfig.SecretLabel] != "true":
		return fmt.Errorf("hub: Secret %s is not a registration (no label %s=true); not deleting it", key, kubeconfig.SecretLabel)
	default:
		err := hub.client.Delete(ctx, secret, client.Preconditions{UID: ptr.To(secret.UID)})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("hub: delete Secret %s: %w", key, err)
		}
		fmt.Fprintf(o.stdout, "hub: deleted registration Secret %s; the hub stops watching %q\n", key, name)
	}
	if !o.cleanup {
		return nil
	}
	if err := cleanupMember(ctx, member.client, o.stdout, name); err != nil {
		return fmt.Errorf("%s: %w", member.role, err)
	}
	fmt.Fprintf(o.stdout, "%s: kept the Widget CRD %s and its Widgets (kubectl delete crd %s removes both)\n", member.role, WidgetCRDName, WidgetCRDName)
	return nil
}
