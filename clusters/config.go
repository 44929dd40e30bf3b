package clusters

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Default client throughput for a member. client-go's 5 QPS / 10 burst starve
// an I/O-bound reconciler; these suit one operator per member API server.
const (
	DefaultQPS   = 300
	DefaultBurst = 600
)

// ErrInvalidKubeconfig is wrapped by every error about a kubeconfig that cannot be used as given.
var ErrInvalidKubeconfig = errors.New("invalid kubeconfig")

// ErrExecPluginRefused is wrapped when a kubeconfig asks for an exec or
// auth-provider credential plugin and those are not allowed.
var ErrExecPluginRefused = errors.New("credential plugins are not allowed")

// ConfigOptions controls how a kubeconfig becomes a rest.Config.
type ConfigOptions struct {
	// QPS and Burst of the member's clients; zero means DefaultQPS and DefaultBurst.
	QPS   float32
	Burst int
	// AllowCredentialPlugins lets exec and auth-provider sections run.
	AllowCredentialPlugins bool
	// UserAgent names the operator to the member's API server.
	UserAgent string
}

// Config is a validated member configuration.
type Config struct {
	REST *rest.Config
	// Context is the kubeconfig context that was used.
	Context string
	// Contexts is how many contexts the kubeconfig holds.
	Contexts int
}

// RESTConfig parses kubeconfig bytes and returns the config of its current
// context. Errors never contain credential material.
func RESTConfig(kubeconfig []byte, opts ConfigOptions) (*Config, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		// clientcmd's decode errors can quote the input; say only what failed.
		return nil, fmt.Errorf("%w: not a kubeconfig document", ErrInvalidKubeconfig)
	}
	if len(raw.Contexts) == 0 {
		return nil, fmt.Errorf("%w: no contexts", ErrInvalidKubeconfig)
	}
	name := raw.CurrentContext
	if name == "" {
		if len(raw.Contexts) > 1 {
			return nil, fmt.Errorf("%w: %d contexts and no current-context", ErrInvalidKubeconfig, len(raw.Contexts))
		}
		for n := range raw.Contexts {
			name = n
		}
	}
	kctx, ok := raw.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("%w: current-context %q does not exist", ErrInvalidKubeconfig, name)
	}
	if _, ok := raw.Clusters[kctx.Cluster]; !ok {
		return nil, fmt.Errorf("%w: context %q names cluster %q, which does not exist", ErrInvalidKubeconfig, name, kctx.Cluster)
	}
	if auth, ok := raw.AuthInfos[kctx.AuthInfo]; ok && !opts.AllowCredentialPlugins {
		if err := refusePlugins(auth); err != nil {
			return nil, fmt.Errorf("context %q: %w", name, err)
		}
	}
	if raw.Clusters[kctx.Cluster].Server == "" {
		return nil, fmt.Errorf("%w: cluster %q has no server", ErrInvalidKubeconfig, kctx.Cluster)
	}

	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: context %q: %s", ErrInvalidKubeconfig, name, redact(err))
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if opts.UserAgent != "" {
		cfg.UserAgent = opts.UserAgent
	}
	// A Proxy function keeps client-go from sharing this member's transport
	// with others, so its connections close when the member goes.
	cfg.Proxy = http.ProxyFromEnvironment
	return &Config{REST: cfg, Context: name, Contexts: len(raw.Contexts)}, nil
}

func refusePlugins(auth *clientcmdapi.AuthInfo) error {
	switch {
	case auth.Exec != nil:
		return fmt.Errorf("%w: the user has an exec section (command %q)", ErrExecPluginRefused, auth.Exec.Command)
	case auth.AuthProvider != nil:
		return fmt.Errorf("%w: the user has an auth-provider section (%q)", ErrExecPluginRefused, auth.AuthProvider.Name)
	}
	return nil
}

// redact keeps the first line of a client-go config error: later lines of
// some of them quote file content.
func redact(err error) string {
	msg := err.Error()
	for i, r := range msg {
		if r == '\n' {
			return msg[:i]
		}
	}
	return msg
}
