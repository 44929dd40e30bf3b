package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/widgethub/widgethub/clusters/connect"
)

// target names a cluster by kubeconfig file and context; empty fields mean
// kubectl's defaults ($KUBECONFIG or ~/.kube/config, and its current context).
type target struct {
	// role is what the cluster is to the user ("hub", `member "alpha"`), for messages.
	role       string
	kubeconfig string
	context    string
	// flags name the flags that set kubeconfig and context, for messages.
	kubeconfigFlag, contextFlag string
}

// cluster is a target's loaded configuration and a client for it.
type cluster struct {
	role    string
	context string
	config  *rest.Config
	client  *kube
	// version is the API server's version, set by ping.
	version string
}

// load reads the target's kubeconfig and builds a client for its context.
// Missing files and contexts are ExitKubeconfig errors.
func (t target) load(timeout time.Duration) (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	source := "the default kubeconfig ($KUBECONFIG or ~/.kube/config)"
	if t.kubeconfig != "" {
		rules.ExplicitPath = t.kubeconfig
		source = t.kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, withCode(ExitKubeconfig, "%s: cannot read kubeconfig %s: %s", t.role, source, connect.FirstLine(err))
	}
	name := t.context
	if name == "" {
		cur, err := connect.CurrentContext(raw)
		if err != nil {
			return nil, withCode(ExitKubeconfig, "%s: kubeconfig %s: %s; pass %s (contexts: %s)",
				t.role, source, err, t.contextFlag, contextNames(raw))
		}
		name = cur.Name
	}
	if _, ok := raw.Contexts[name]; !ok {
		return nil, withCode(ExitKubeconfig, "%s: context %q not found in kubeconfig %s (contexts: %s)",
			t.role, name, source, contextNames(raw))
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		return nil, withCode(ExitKubeconfig, "%s: context %q of kubeconfig %s: %s", t.role, name, source, connect.FirstLine(err))
	}
	cfg.Timeout = timeout
	cfg.UserAgent = userAgent
	// kubectl's own limits: client-go's 5 QPS would make unjoin --cleanup's
	// look through every kind in the namespace take seconds.
	cfg.QPS, cfg.Burst = 50, 300
	// A redirect would take the context's credentials to the host it
	// names: refused in every client built from cfg, and by this one. A
	// member's answers are bounded as the hub bounds them.
	cfg.Wrap(connect.GuardUserContext)
	return newCluster(t.role, name, cfg)
}

// newCluster is the cluster that role's context reaches with cfg.
func newCluster(role, context string, cfg *rest.Config) (*cluster, error) {
	c, err := newKube(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: client for context %q: %w", role, context, err)
	}
	return &cluster{role: role, context: context, config: cfg, client: c}, nil
}

func contextNames(raw *clientcmdapi.Config) string {
	if len(raw.Contexts) == 0 {
		return "none"
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// connect loads the target and checks that it answers.
func (t target) connect(timeout time.Duration) (*cluster, error) {
	c, err := t.load(timeout)
	if err != nil {
		return nil, err
	}
	return c, c.ping()
}

// ping asks the API server for its version: the cheapest request that proves
// the address, the CA and the credentials. A server that does not answer is
// an ExitUnreachable error.
func (c *cluster) ping() error {
	var v version.Info
	err := connect.GetDiscovery(context.Background(), c.client.raw, "/version", &v)
	switch {
	case err == nil:
		c.version = v.GitVersion
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the API server at %s rejects the credentials of context %q: %w", c.role, c.config.Host, c.context, err)
	case apierrors.IsForbidden(err):
		// The server answered: it is reachable even though /version is closed to this user.
		return nil
	case c.config.ExecProvider != nil && strings.Contains(err.Error(), "getting credentials: "):
		// client-go's exec authenticator failed: its errors have no type.
		return withCode(ExitKubeconfig, "%s: the credential plugin failed: %s", c.role, describeNetError(err))
	case errors.Is(err, connect.ErrRedirectRefused):
		return withCode(ExitUnreachable, "%s: the API server at %s (context %q) answers with a redirect, which widgethub never follows",
			c.role, c.config.Host, c.context)
	default:
		return withCode(ExitUnreachable, "%s: cannot reach the API server at %s (context %q): %s",
			c.role, c.config.Host, c.context, describeNetError(err))
	}
}

// describeNetError shortens client-go's transport errors to their cause.
func describeNetError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return "timed out: " + err.Error()
	}
	return connect.FirstLine(err)
}
