package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

func clustersCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "clusters",
		Short: "List the registered members and their state",
		Long: `clusters lists the registration Secrets on the hub with the hub's view of
each member (its MemberCluster status): Ready, the reason, the member's
Kubernetes version, its number of Widgets, and the address the hub uses.
Members registered by ClusterProfiles follow, their server shown as
(ClusterProfile): the profile names it, and its credentials are the hub's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.clusters(cmd.Context()) },
	}
}

func (g *globals) clusters(ctx context.Context) error {
	hub, err := g.loadHub()
	if err != nil {
		return err
	}
	secrets, err := g.registrations(ctx, hub)
	if err != nil {
		return err
	}
	status := map[string]*v1alpha1.MemberCluster{}
	var mcs v1alpha1.MemberClusterList
	switch err := hub.client.List(ctx, &mcs, client.InNamespace(g.registrationNamespace)); {
	case meta.IsNoMatchError(err):
		fmt.Fprintln(g.stderr, "The hub does not serve MemberClusters (CRD missing): showing the registrations only.")
	case err != nil:
		return fmt.Errorf("hub: list MemberClusters in %s: %w", g.registrationNamespace, err)
	}
	var profiles []*v1alpha1.MemberCluster
	for i := range mcs.Items {
		mc := &mcs.Items[i]
		status[mc.Name] = mc
		if owner := metav1.GetControllerOf(mc); owner != nil && owner.Kind == "ClusterProfile" {
			profiles = append(profiles, mc)
		}
	}
	if len(secrets) == 0 && len(profiles) == 0 {
		fmt.Fprintf(g.stderr, "No members registered in namespace %s on the hub.\n", g.registrationNamespace)
		return nil
	}

	tw := newTable(g.stdout, "NAME", "READY", "REASON", "VERSION", "WIDGETS", "SERVER", "TOKEN-EXPIRES", "SERVED-BY", "AGE")
	for _, s := range secrets {
		ready, reason, version, widgets, servedBy := memberColumns(status[s.Name])
		row(tw, s.Name, ready, reason, version, widgets, viewKubeconfig(s.Data[registration.SecretKey]).server, expiryOf(&s), servedBy, age(s.CreationTimestamp))
	}
	for _, mc := range profiles {
		ready, reason, version, widgets, servedBy := memberColumns(mc)
		row(tw, mc.Name, ready, reason, version, widgets, "(ClusterProfile)", "-", servedBy, age(mc.CreationTimestamp))
	}
	return tw.Flush()
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
	err := hub.client.List(ctx, &list, client.InNamespace(g.registrationNamespace), client.MatchingLabels{registration.SecretLabel: "true"})
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
	cur, err := clusters.CurrentContext(raw)
	if err != nil {
		return kubeconfigView{server: "<no current context>"}
	}
	v := kubeconfigView{server: cmp.Or(cur.Cluster.Server, "<no server>")}
	if cur.User != nil {
		v.token = cur.User.Token
	}
	return v
}

func newTable(out io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	row(tw, header...)
	return tw
}

// row writes one line of a table. Cells hold what members chose (versions,
// names, condition statuses), so each is printable and bounded first: a tab
// or newline of a member cannot shift the table, nor an escape sequence reach
// the terminal.
func row(tw *tabwriter.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = v1alpha1.Printable(c, maxCell)
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// The bounds of what the plugin prints of text it did not choose: a table
// cell, and an error (which may quote a member's answer).
const (
	maxCell  = v1alpha1.MaxNameLength
	maxError = 4 * v1alpha1.MaxMessageLength
)

// printable is text the plugin did not choose (an error, which may quote a
// member's answer; names a member listed) as the plugin prints it.
func printable(text string) string { return v1alpha1.Printable(text, maxError) }

// age prints how long ago t was, as kubectl does.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
