package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

type widgetsOptions struct {
	*globals
	allNamespaces bool
	namespace     string
	cluster       string
}

func widgetsCommand(g *globals) *cobra.Command {
	o := &widgetsOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "widgets [-A | -n NAMESPACE] [--cluster NAME]",
		Short: "List the Widgets of every member",
		Long: `widgets lists Widgets across the members in one table with a CLUSTER
column. It reads each member through its registration kubeconfig on the hub,
so it sees what the hub sees, and it needs to reach each member at the address
the hub uses. A member that cannot be read is reported on stderr and the
command exits non-zero after printing the others.`,
		Example: `  kubectl widgethub widgets -A
  kubectl widgethub widgets -n shop --cluster alpha`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List Widgets in all namespaces of the members.")
	f.StringVarP(&o.namespace, "namespace", "n", corev1.NamespaceDefault, "Namespace of the Widgets in the members.")
	f.StringVar(&o.cluster, "cluster", "", "Only this member.")
	return cmd
}

// memberWidgets is what one member returned.
type memberWidgets struct {
	cluster string
	widgets []v1alpha1.Widget
	err     error
}

func (o *widgetsOptions) run(ctx context.Context) error {
	if o.cluster != "" {
		if err := validateName(o.cluster); err != nil {
			return err
		}
	}
	hub, err := o.loadHub()
	if err != nil {
		return err
	}
	secrets, err := o.registrations(ctx, hub)
	if err != nil {
		return err
	}
	if o.cluster != "" {
		secrets = slices.DeleteFunc(secrets, func(s corev1.Secret) bool { return s.Name != o.cluster })
		if len(secrets) == 0 {
			return withCode(ExitNotFound, "%q is not registered on the hub (no registration Secret %s/%s)", o.cluster, o.registrationNamespace, o.cluster)
		}
	}
	results := make([]memberWidgets, len(secrets))
	var wg sync.WaitGroup
	for i, s := range secrets {
		wg.Go(func() { results[i] = o.list(ctx, s) })
	}
	wg.Wait()
	return o.print(results)
}

// print writes the Widgets of the members that could be read as one table,
// and reports the others on stderr after it: then its error says how many
// failed.
func (o *widgetsOptions) print(results []memberWidgets) error {
	var failed []memberWidgets
	var errs []error
	total := 0
	header := []string{"CLUSTER", "NAMESPACE", "NAME", "REPLICAS", "AVAILABLE", "READY", "AGE"}
	if !o.allNamespaces {
		header = slices.Delete(header, 1, 2)
	}
	tw := newTable(o.stdout, header...)
	for _, r := range results {
		if r.err != nil {
			failed = append(failed, r)
			errs = append(errs, r.err)
			continue
		}
		for _, w := range r.widgets {
			total++
			ready := "Unknown"
			if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady); c != nil {
				ready = string(c.Status)
			}
			cells := []string{r.cluster, w.Namespace, w.Name, strconv.Itoa(int(w.DesiredReplicas())),
				strconv.Itoa(int(w.Status.AvailableReplicas)), ready, age(w.CreationTimestamp)}
			if !o.allNamespaces {
				cells = slices.Delete(cells, 1, 2)
			}
			row(tw, cells...)
		}
	}
	if total == 0 && len(errs) == 0 {
		where := "namespace " + o.namespace
		if o.allNamespaces {
			where = "any namespace"
		}
		fmt.Fprintf(o.stderr, "No Widgets found in %s of %d member(s).\n", where, len(results))
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The table is written when flushed: the members that could not be read
	// come after it, as docs/plugin.md says.
	for _, r := range failed {
		fmt.Fprintf(o.stderr, "error: cluster %q: %s\n", r.cluster, printable(r.err.Error()))
	}
	if len(errs) > 0 {
		return &exitError{code: exitCode(errs[0]), err: fmt.Errorf("%d of %d members could not be read", len(errs), len(results))}
	}
	return nil
}

// list reads the Widgets of the member registered by s, with its registration kubeconfig.
func (o *widgetsOptions) list(ctx context.Context, s corev1.Secret) memberWidgets {
	r := memberWidgets{cluster: s.Name}
	// The defaults, as on the hub: a registration names no local files, no
	// proxy, no credential plugin, and verifies TLS; this laptop is no less
	// worth protecting from a hostile Secret than the hub.
	cfg, err := clusters.RESTConfig(s.Data[registration.SecretKey], clusters.ConfigOptions{UserAgent: userAgent})
	if err != nil {
		r.err = withCode(ExitKubeconfig, "registration kubeconfig refused: %w", err)
		return r
	}
	cfg.REST.Timeout = o.requestTimeout
	c, err := newCluster("registration kubeconfig", cfg.Context, cfg.REST)
	if err != nil {
		r.err = err
		return r
	}
	if r.err = c.ping(); r.err != nil {
		return r
	}
	var list v1alpha1.WidgetList
	opts := []client.ListOption{}
	if !o.allNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	if err := c.client.List(ctx, &list, opts...); err != nil {
		r.err = fmt.Errorf("list Widgets: %w", err)
		return r
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Widget) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	r.widgets = list.Items
	return r
}
