package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

func clustersCommand(g *globals) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "clusters [-o wide|json|yaml] [--no-headers]",
		Short: "List the registered members and their state",
		Long: `clusters lists the registration Secrets on the hub with the hub's view of
each member (its MemberCluster status): Ready, the reason, the member's
Kubernetes version, its number of Widgets, and the address the hub uses.
Members registered by ClusterProfiles follow, their server shown as
(ClusterProfile): the profile names it, and its credentials are the hub's.

-o wide adds SOURCE (Secret or ClusterProfile), LAST-PROBE and the message of
the Ready condition. -o json and -o yaml print the members' MemberClusters as
a kubectl List; a registration the hub has not reported on yet has none, and
is named on stderr.`,
		Example: `  kubectl widgethub clusters -o wide
  kubectl widgethub clusters -o json | jq -r '.items[] | select(.status.conditions[]? | .type == "Ready" and .status != "True") | .metadata.name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			return g.clusters(cmd.Context(), out)
		},
	}
	out.addFlags(cmd.Flags())
	return cmd
}

// registered is one member clusters lists: its registration Secret (nil for
// a ClusterProfile's member) and its MemberCluster (nil until the hub
// reports on it).
type registered struct {
	name   string
	secret *corev1.Secret
	status *v1alpha1.MemberCluster
}

func (g *globals) clusters(ctx context.Context, out output) error {
	hub, err := g.loadHub()
	if err != nil {
		return err
	}
	members, err := g.registered(ctx, hub)
	if err != nil {
		return err
	}
	switch {
	case out.list():
		return g.printMemberClusters(out, members)
	case len(members) == 0:
		fmt.Fprintf(g.stderr, "No members registered in namespace %s on the hub.\n", g.registrationNamespace)
		return nil
	}
	header := []string{"NAME", "READY", "REASON", "VERSION", "WIDGETS", "SERVER", "TOKEN-EXPIRES", "SERVED-BY", "AGE"}
	if out.wide() {
		header = append(header, "SOURCE", "LAST-PROBE", "MESSAGE")
	}
	tw := out.newTable(g.stdout, header...)
	for _, m := range members {
		ready, reason, version, widgets, servedBy := memberColumns(m.status)
		server, expires, source, created := "(ClusterProfile)", "-", "ClusterProfile", metav1.Time{}
		if m.secret != nil {
			server, expires, source, created = viewKubeconfig(m.secret.Data[registration.SecretKey]).server, expiryOf(m.secret), "Secret", m.secret.CreationTimestamp
		} else {
			created = m.status.CreationTimestamp
		}
		cells := []string{m.name, ready, reason, version, widgets, server, expires, servedBy, age(created)}
		if out.wide() {
			lastProbe, message := wideMemberColumns(m.status)
			cells = append(cells, source, lastProbe, message)
		}
		row(tw, cells...)
	}
	return tw.Flush()
}

// registered lists the members registered on the hub, by name: the
// registration Secrets, then the members of ClusterProfiles, which only
// their MemberClusters (owned by the ClusterProfile) show.
func (g *globals) registered(ctx context.Context, hub *cluster) ([]registered, error) {
	secrets, err := g.registrations(ctx, hub)
	if err != nil {
		return nil, err
	}
	status := map[string]*v1alpha1.MemberCluster{}
	var profiles []registered
	for _, ns := range slices.Compact([]string{g.registrationNamespace, g.profileNamespace()}) {
		var mcs v1alpha1.MemberClusterList
		switch err := hub.client.List(ctx, &mcs, listOptions{namespace: ns}); {
		case meta.IsNoMatchError(err):
			fmt.Fprintln(g.stderr, "The hub does not serve MemberClusters (CRD missing): showing the registrations only.")
			return registeredBySecrets(secrets, status), nil
		case err != nil:
			return nil, fmt.Errorf("hub: list MemberClusters in %s: %w", ns, err)
		}
		for i := range mcs.Items {
			mc := &mcs.Items[i]
			if ns == g.registrationNamespace {
				status[mc.Name] = mc
			}
			if owner := metav1.GetControllerOf(mc); ns == g.profileNamespace() && owner != nil && owner.Kind == "ClusterProfile" {
				profiles = append(profiles, registered{name: mc.Name, status: mc})
			}
		}
	}
	return append(registeredBySecrets(secrets, status), profiles...), nil
}

func registeredBySecrets(secrets []corev1.Secret, status map[string]*v1alpha1.MemberCluster) []registered {
	out := make([]registered, len(secrets))
	for i := range secrets {
		out[i] = registered{name: secrets[i].Name, secret: &secrets[i], status: status[secrets[i].Name]}
	}
	return out
}

// printMemberClusters prints the members' MemberClusters as a List, and
// names on stderr the registrations that have none yet.
func (g *globals) printMemberClusters(out output, members []registered) error {
	var items []map[string]any
	for _, m := range members {
		if m.status == nil {
			fmt.Fprintf(g.stderr, "%s/%s: no MemberCluster yet (the hub has not reported on this registration)\n",
				g.registrationNamespace, printable(m.name))
			continue
		}
		item, err := listItem(m.status)
		if err != nil {
			return err
		}
		items = append(items, item)
	}
	return out.printList(g.stdout, items)
}

// wideMemberColumns are the columns -o wide adds that the MemberCluster
// (nil: none yet) fills: when the hub last probed the member, and the
// message of its Ready condition.
func wideMemberColumns(mc *v1alpha1.MemberCluster) (lastProbe, message string) {
	lastProbe, message = "-", "-"
	if mc == nil {
		return
	}
	if mc.Status.LastProbeTime != nil {
		lastProbe = age(*mc.Status.LastProbeTime)
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady); c != nil && c.Message != "" {
		message = c.Message
	}
	return
}

// memberColumns are the columns of a member that its MemberCluster (nil:
// none yet) fills.
func memberColumns(mc *v1alpha1.MemberCluster) (ready, reason, version, widgets, servedBy string) {
	ready, reason, version, widgets, servedBy = "Unknown", "-", "-", "-", "-"
	if mc == nil {
		return
	}
	// The hub replica serving the member, when the hub is sharded.
	servedBy = cmp.Or(mc.Status.ServedBy, servedBy)
	if c := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady); c != nil {
		ready, reason = string(c.Status), c.Reason
	}
	if mc.Status.KubernetesVersion != "" {
		version = mc.Status.KubernetesVersion
	}
	// A negative count means the hub could not count them.
	if mc.Status.LastProbeTime != nil && mc.Status.Widgets >= 0 {
		widgets = strconv.Itoa(int(mc.Status.Widgets))
	}
	return
}

// registrations lists the hub's registration Secrets by name.
func (g *globals) registrations(ctx context.Context, hub *cluster) ([]corev1.Secret, error) {
	var list corev1.SecretList
	err := hub.client.List(ctx, &list, listOptions{namespace: g.registrationNamespace, labels: map[string]string{registration.SecretLabel: "true"}})
	if err != nil {
		return nil, fmt.Errorf("hub: list registration Secrets in %s: %w", g.registrationNamespace, err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// kubeconfigView is what the plugin shows of a registration kubeconfig: the
// server of its current context (or a word saying why there is none) and its
// bearer token. The kubeconfig is parsed, never followed: no file it names is read.
type kubeconfigView struct{ server, token string }

func viewKubeconfig(doc []byte) kubeconfigView {
	raw, err := clientcmd.Load(doc)
	if err != nil {
		return kubeconfigView{server: "<invalid kubeconfig>"}
	}
	cur, err := connect.CurrentContext(raw)
	if err != nil {
		return kubeconfigView{server: "<no current context>"}
	}
	v := kubeconfigView{server: cmp.Or(cur.Cluster.Server, "<no server>")}
	if cur.User != nil {
		v.token = cur.User.Token
	}
	return v
}
