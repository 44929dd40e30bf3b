package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
)

const (
	// userAgent and fieldManager name the plugin to API servers.
	userAgent    = "kubectl-widgethub"
	fieldManager = "kubectl-widgethub"
	// DefaultRequestTimeout bounds every request the plugin makes.
	DefaultRequestTimeout = 15 * time.Second
)

// scheme holds the kinds the plugin reads and writes as typed objects, in
// the hub (with ClusterProfiles) and the members, and only those: each
// AddToScheme links its API group into the plugin (kube).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, admissionv1.AddToScheme,
		authenticationv1.AddToScheme, v1alpha1.AddToScheme, inventoryv1alpha1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}()

// globals are the flags every command takes: where the hub is.
type globals struct {
	kubeconfig            string
	context               string
	registrationNamespace string
	// clusterProfileNamespace holds the ClusterProfiles; empty: registrationNamespace.
	clusterProfileNamespace string
	requestTimeout          time.Duration
	stdout, stderr          io.Writer
}

// profileNamespace is the hub namespace of the ClusterProfiles that register members.
func (g *globals) profileNamespace() string {
	return cmp.Or(g.clusterProfileNamespace, g.registrationNamespace)
}

func (g *globals) hub() target {
	return target{role: "hub", kubeconfig: g.kubeconfig, context: g.context, kubeconfigFlag: "--kubeconfig", contextFlag: "--context"}
}

// loadHub loads the hub and checks that it answers.
func (g *globals) loadHub() (*cluster, error) {
	return g.hub().connect(g.requestTimeout)
}

// memberFlags name a member and its admin's credentials.
type memberFlags struct {
	kubeconfig, context string
}

// addFlags adds --member-kubeconfig and --member-context; note ends their help.
func (m *memberFlags) addFlags(f *pflag.FlagSet, note string) {
	f.StringVar(&m.kubeconfig, "member-kubeconfig", "", "Kubeconfig with admin credentials for the member (default: the hub's --kubeconfig, else $KUBECONFIG or ~/.kube/config)."+note)
	f.StringVar(&m.context, "member-context", "", "Context of the member in that kubeconfig (default its current context)."+note)
}

// set reports whether either flag was given.
func (m memberFlags) set() bool { return m.kubeconfig != "" || m.context != "" }

// loadMember loads the member NAME named by m (its kubeconfig defaults to the
// hub's) and checks that it answers.
func (g *globals) loadMember(name string, m memberFlags) (*cluster, error) {
	return target{role: fmt.Sprintf("member %q", name), kubeconfig: cmp.Or(m.kubeconfig, g.kubeconfig), context: m.context,
		kubeconfigFlag: "--member-kubeconfig", contextFlag: "--member-context"}.connect(g.requestTimeout)
}

// Run runs `kubectl widgethub` with args (without the program name) and
// returns the process exit code. Output goes to stdout, messages and errors
// to stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "widgethub",
		Short: "Join member clusters to a widgethub hub and see their Widgets",
		Long: `kubectl widgethub manages the members of a widgethub hub.

The hub is the cluster of your current kubeconfig context (or --kubeconfig and
--context). A member joins with the credentials of its admin; the hub then
reaches it with a ServiceAccount token that can do only what widgethub needs.

Exit codes: 0 ok, 1 error, 2 usage, 3 kubeconfig or context problem,
4 cluster unreachable, 5 already registered, 6 no such registration,
7 conflict: objects in the member that join did not create (see join --adopt),
or a hub Secret NAME that is not a registration.`,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl widgethub"},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(ExitUsage, "%w", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "Kubeconfig of the hub (default $KUBECONFIG or ~/.kube/config).")
	pf.StringVar(&g.context, "context", "", "Context of the hub in that kubeconfig (default its current context).")
	pf.StringVar(&g.registrationNamespace, "registration-namespace", registration.DefaultNamespace,
		"Namespace on the hub that holds the registration Secrets.")
	pf.StringVar(&g.clusterProfileNamespace, "clusterprofile-namespace", "",
		"Namespace on the hub that holds the ClusterProfiles registering members, as the hub's flag of that name (default: the registration namespace).")
	pf.DurationVar(&g.requestTimeout, "request-timeout", DefaultRequestTimeout, "Timeout of each request to a cluster.")

	root.AddCommand(joinCommand(g), unjoinCommand(g), clustersCommand(g), widgetsCommand(g), completionCommand())
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = withCode(ExitUsage, "%w", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", printable(err.Error()))
	}
	return exitCode(err)
}

// exactlyOneName is the Args check of join and unjoin: one cluster name, a DNS-1123 label.
func exactlyOneName(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return withCode(ExitUsage, "expected exactly one cluster NAME, got %d arguments", len(args))
	}
	return validateName(args[0])
}

// validateName accepts a cluster name that can name a Secret and appear in a
// DNS name (kind's NAME-control-plane): a DNS-1123 label.
func validateName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return withCode(ExitUsage, "invalid cluster name %q: %s", name, errs[0])
	}
	return nil
}
