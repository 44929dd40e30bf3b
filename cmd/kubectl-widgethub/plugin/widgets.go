package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

type widgetsOptions struct {
	*globals
	allNamespaces bool
	namespace     string
	cluster       string
	// providerFile is the hub administrator's access provider file, for
	// the members of ClusterProfiles.
	providerFile string
	out          output
}

func widgetsCommand(g *globals) *cobra.Command {
	o := &widgetsOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "widgets [-A | -n NAMESPACE] [--cluster NAME] [--clusterprofile-provider-file FILE] [-o wide|json|yaml] [--no-headers]",
		Short: "List the Widgets of every member",
		Long: `widgets lists Widgets across the members in one table with a CLUSTER
column. It reads each member through its registration kubeconfig on the hub,
so it sees what the hub sees, and it needs to reach each member at the address
the hub uses. A member that cannot be read is reported on stderr and the
command exits non-zero after printing the others.

A ClusterProfile holds no credentials: the hub reaches its member through the
exec plugin its administrator's access provider file names. Pass that file
with --clusterprofile-provider-file to read those members the same way (it
runs the file's commands on this machine); without it each such member is
reported as registered by a ClusterProfile.

-o wide adds the Ready reason, the image, the Widget's generation and the
one its status observed, and the Deployment's ready/desired replicas.
-o json and -o yaml print a kubectl List of the Widgets as the members serve
them, each with a field "cluster" beside apiVersion and kind: the member it
came from. The Widget API has no such field; the plugin adds it.`,
		Example: `  kubectl widgethub widgets -A
  kubectl widgethub widgets -n shop --cluster alpha -o wide
  kubectl widgethub widgets -A --clusterprofile-provider-file providers.json -o json | jq -r '.items[] | .cluster + "/" + .metadata.name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List Widgets in all namespaces of the members.")
	f.StringVarP(&o.namespace, "namespace", "n", corev1.NamespaceDefault, "Namespace of the Widgets in the members.")
	f.StringVar(&o.cluster, "cluster", "", "Only this member.")
	f.StringVar(&o.providerFile, "clusterprofile-provider-file", "",
		"The hub's access provider file (JSON of cluster-inventory-api's pkg/access), to reach the members of ClusterProfiles as the hub does; its commands run here.")
	o.out.addFlags(f)
	return cmd
}

// reachable is a member widgets reads: its name, and its config (or why it
// has none).
type reachable struct {
	name string
	// role names the member's source in messages.
	role   string
	config func() (*connect.Config, error)
}

// memberWidgets is what one member returned.
type memberWidgets struct {
	cluster string
	widgets []v1alpha1.Widget
	// deployments are the Widgets' Deployments by namespace/name (-o wide).
	deployments map[types.NamespacedName]*appsv1.Deployment
	err         error
}

func (o *widgetsOptions) run(ctx context.Context) error {
	if err := o.out.validate(); err != nil {
		return err
	}
	if o.cluster != "" {
		if err := validateName(o.cluster); err != nil {
			return err
		}
	}
	var providers *access.Config
	if o.providerFile != "" {
		var err error
		if providers, err = connect.LoadAccessProviders(o.providerFile); err != nil {
			return withCode(ExitKubeconfig, "%w", err)
		}
	}
	hub, err := o.loadHub()
	if err != nil {
		return err
	}
	members, err := o.members(ctx, hub, providers)
	if err != nil {
		return err
	}
	if o.cluster != "" {
		members = slices.DeleteFunc(members, func(m reachable) bool { return m.name != o.cluster })
		if len(members) == 0 {
			return withCode(ExitNotFound, "%q is not registered on the hub (no registration Secret %s/%s, nor ClusterProfile %s/%s)",
				o.cluster, o.registrationNamespace, o.cluster, o.profileNamespace(), o.cluster)
		}
	}
	results := make([]memberWidgets, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { results[i] = o.list(ctx, m) })
	}
	wg.Wait()
	if o.out.list() {
		err = o.printList(results)
	} else {
		err = o.printTable(results)
	}
	if err != nil {
		return err
	}
	return o.reportFailed(results)
}

// members are the members registered on the hub, by name: those of the
// registration Secrets and those of the ClusterProfiles (profile.go).
func (o *widgetsOptions) members(ctx context.Context, hub *cluster, providers *access.Config) ([]reachable, error) {
	secrets, err := o.registrations(ctx, hub)
	if err != nil {
		return nil, err
	}
	members := make([]reachable, len(secrets))
	taken := map[string]bool{}
	for i, s := range secrets {
		taken[s.Name] = true
		members[i] = reachable{name: s.Name, role: "registration kubeconfig", config: func() (*connect.Config, error) {
			// The defaults, as on the hub: a registration names no local
			// files, no proxy, no credential plugin, and verifies TLS; this
			// laptop is no less worth protecting from a hostile Secret than the hub.
			cfg, err := connect.RESTConfig(s.Data[registration.SecretKey], connect.ConfigOptions{UserAgent: userAgent})
			if err != nil {
				return nil, withCode(ExitKubeconfig, "registration kubeconfig refused: %w", err)
			}
			return cfg, nil
		}}
	}
	profiles, err := o.profileMembers(ctx, hub, providers, taken)
	if err != nil {
		return nil, err
	}
	members = append(members, profiles...)
	slices.SortFunc(members, func(a, b reachable) int { return cmp.Compare(a.name, b.name) })
	return members, nil
}

// printTable writes the Widgets of the members that could be read as one table.
func (o *widgetsOptions) printTable(results []memberWidgets) error {
	total, failed := 0, 0
	header := []string{"CLUSTER", "NAMESPACE", "NAME", "REPLICAS", "AVAILABLE", "READY", "AGE"}
	if o.out.wide() {
		header = append(header, "REASON", "IMAGE", "GENERATION", "OBSERVED", "DEPLOYMENT")
	}
	if !o.allNamespaces {
		header = slices.Delete(header, 1, 2)
	}
	tw := o.out.newTable(o.stdout, header...)
	for _, r := range results {
		if r.err != nil {
			failed++
			continue
		}
		for _, w := range r.widgets {
			total++
			ready, reason := "Unknown", "-"
			if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady); c != nil {
				ready, reason = string(c.Status), c.Reason
			}
			cells := []string{r.cluster, w.Namespace, w.Name, strconv.Itoa(int(w.DesiredReplicas())),
				strconv.Itoa(int(w.Status.AvailableReplicas)), ready, age(w.CreationTimestamp)}
			if o.out.wide() {
				cells = append(cells, reason, w.DesiredImage(), strconv.FormatInt(w.Generation, 10),
					strconv.FormatInt(w.Status.ObservedGeneration, 10), deploymentState(&w, r.deployments))
			}
			if !o.allNamespaces {
				cells = slices.Delete(cells, 1, 2)
			}
			row(tw, cells...)
		}
	}
	if total == 0 && failed == 0 {
		where := "namespace " + o.namespace
		if o.allNamespaces {
			where = "any namespace"
		}
		fmt.Fprintf(o.stderr, "No Widgets found in %s of %d member(s).\n", where, len(results))
		return nil
	}
	return tw.Flush()
}

// printList writes the Widgets of the members that could be read as a
// List, each with the field "cluster": the member it came from.
func (o *widgetsOptions) printList(results []memberWidgets) error {
	var items []map[string]any
	for _, r := range results {
		for i := range r.widgets {
			item, err := listItem(&r.widgets[i])
			if err != nil {
				return err
			}
			item["cluster"] = r.cluster
			items = append(items, item)
		}
	}
	return o.out.printList(o.stdout, items)
}

// reportFailed reports the members that could not be read on stderr, after
// the table or List (docs/plugin.md says so): then its error says how many
// failed.
func (o *widgetsOptions) reportFailed(results []memberWidgets) error {
	var errs []error
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(o.stderr, "error: cluster %q: %s\n", r.cluster, printable(r.err.Error()))
			errs = append(errs, r.err)
		}
	}
	if len(errs) > 0 {
		return &exitError{code: exitCode(errs[0]), err: fmt.Errorf("%d of %d members could not be read", len(errs), len(results))}
	}
	return nil
}

// deploymentState is the READY column kubectl shows for w's Deployment
// (ready/desired replicas), or <none> when w controls no Deployment.
func deploymentState(w *v1alpha1.Widget, deployments map[types.NamespacedName]*appsv1.Deployment) string {
	d := deployments[keyOf(w)]
	if d == nil || !metav1.IsControlledBy(d, w) {
		return "<none>"
	}
	return fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1))
}

// widgetChildren selects the Deployments of Widgets (DESIGN.md: the Widget
// child's labels).
var widgetChildren = map[string]string{"app.kubernetes.io/managed-by": "widgethub"}

// list reads the Widgets of member m (and, for -o wide, their Deployments).
func (o *widgetsOptions) list(ctx context.Context, m reachable) memberWidgets {
	r := memberWidgets{cluster: m.name}
	cfg, err := m.config()
	if err != nil {
		r.err = err
		return r
	}
	cfg.REST.Timeout = o.requestTimeout
	c, err := newCluster(m.role, cfg.Context, cfg.REST)
	if err != nil {
		r.err = err
		return r
	}
	if r.err = c.ping(); r.err != nil {
		return r
	}
	var opts listOptions
	if !o.allNamespaces {
		opts.namespace = o.namespace
	}
	var list v1alpha1.WidgetList
	if err := c.client.List(ctx, &list, opts); err != nil {
		r.err = fmt.Errorf("list Widgets: %w", err)
		return r
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Widget) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	r.widgets = list.Items
	if o.out.wide() {
		var deployments appsv1.DeploymentList
		opts.labels = widgetChildren
		if err := c.client.List(ctx, &deployments, opts); err != nil {
			r.err = fmt.Errorf("list the Widgets' Deployments: %w", err)
			return r
		}
		r.deployments = map[types.NamespacedName]*appsv1.Deployment{}
		for i := range deployments.Items {
			r.deployments[keyOf(&deployments.Items[i])] = &deployments.Items[i]
		}
	}
	return r
}
