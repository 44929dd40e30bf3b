package connect

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
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

// ErrUnsafeKubeconfig is wrapped when a kubeconfig would make the hub read a
// file of its own, connect through a proxy, act as another identity, or skip
// TLS verification. Its messages name the field, never its value.
var ErrUnsafeKubeconfig = errors.New("unsafe kubeconfig")

// MaxKubeconfigBytes bounds a registration kubeconfig: real ones are a few KiB.
const MaxKubeconfigBytes = 256 << 10

// ConfigOptions controls how a kubeconfig becomes a rest.Config.
type ConfigOptions struct {
	// QPS and Burst of the member's clients; zero means DefaultQPS and DefaultBurst.
	QPS   float32
	Burst int
	// AllowCredentialPlugins lets exec and auth-provider sections run.
	AllowCredentialPlugins bool
	// AllowInsecure accepts insecure-skip-tls-verify and http:// servers.
	AllowInsecure bool
	// AllowLinkLocal lets the member's connections go to link-local and cloud
	// metadata addresses (see Dialer).
	AllowLinkLocal bool
	// UserAgent names the operator to the member's API server.
	UserAgent string
	// RequestTimeout bounds every request to the member but watches; zero
	// means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds each of the member's answers but watches
	// (whose events MaxEventBytes bounds), after decompression; zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// DefaultRequestTimeout bounds a member request (watches excepted): a member
// that accepts connections and never answers must not hold a worker longer.
const DefaultRequestTimeout = 30 * time.Second

// Config is a validated member configuration.
type Config struct {
	REST *rest.Config
	// Context is the kubeconfig context that was used.
	Context string
	// Contexts is how many contexts the kubeconfig holds.
	Contexts int
	// RequestTimeout bounds every request but watches (see ConfigOptions).
	RequestTimeout time.Duration
	// TokenExpiry is the exp claim of the bearer token when it is a JWT
	// (read, not verified); zero when unknown.
	TokenExpiry time.Time
}

// RESTConfig parses kubeconfig bytes and returns the config of its current
// context. It refuses, before anything is read or sent, a kubeconfig larger
// than MaxKubeconfigBytes (ErrInvalidKubeconfig), credential plugins unless
// allowed (ErrExecPluginRefused), and whatever refuseUnsafe lists
// (ErrUnsafeKubeconfig). The config dials through Dialer. Errors never contain
// credential material or file paths.
func RESTConfig(kubeconfig []byte, opts ConfigOptions) (*Config, error) {
	if len(kubeconfig) > MaxKubeconfigBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrInvalidKubeconfig, len(kubeconfig), MaxKubeconfigBytes)
	}
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		// clientcmd's decode errors can quote the input; say only what failed.
		return nil, fmt.Errorf("%w: not a kubeconfig document", ErrInvalidKubeconfig)
	}
	cur, err := CurrentContext(raw)
	if err != nil {
		return nil, err
	}
	name := cur.Name
	if cur.User != nil && !opts.AllowCredentialPlugins {
		if err := refusePlugins(cur.User); err != nil {
			return nil, fmt.Errorf("context %q: %w", name, err)
		}
	}
	if cur.Cluster.Server == "" {
		return nil, fmt.Errorf("%w: context %q names a cluster with no server", ErrInvalidKubeconfig, name)
	}
	if err := refuseUnsafe(cur, opts.AllowInsecure); err != nil {
		return nil, fmt.Errorf("context %q: %w", name, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: context %q: %s", ErrInvalidKubeconfig, name, FirstLine(err))
	}
	return finish(cfg, name, len(raw.Contexts), opts), nil
}

// ExecConfig is the config of a member whose server (and CA) a registration
// names and whose credentials come from an exec plugin that the hub's
// administrator configured (a ClusterProfile's access provider): cfg is the
// rest.Config built from both, context names where it came from. The
// server is checked as a kubeconfig's is (https:// unless AllowInsecure, no
// credentials in the URL); cfg must carry no credential of its own but its
// exec provider, and no file, proxy or impersonation; its proxy is replaced
// by the environment's and it dials through Dialer, so that the destination
// checks of every member apply. AllowCredentialPlugins is not asked: the
// plugin is the administrator's, not the registration's.
func ExecConfig(cfg *rest.Config, context string, opts ConfigOptions) (*Config, error) {
	if cfg.ExecProvider == nil || cfg.ExecProvider.Command == "" {
		return nil, fmt.Errorf("%w: %s: no exec credential provider", ErrInvalidKubeconfig, context)
	}
	for _, f := range []struct {
		set   bool
		field string
	}{
		{cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.Username != "" || cfg.Password != "", "credentials besides the exec provider"},
		{cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "", "a certificate or key file"},
		{cfg.AuthProvider != nil, "an auth-provider"},
		{cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0, "impersonation"},
		{cfg.Insecure && !opts.AllowInsecure, "insecure-skip-tls-verify (allowed only with --allow-insecure-members)"},
	} {
		if f.set {
			return nil, fmt.Errorf("%s: %w: %s is not allowed", context, ErrUnsafeKubeconfig, f.field)
		}
	}
	if err := checkServer(cfg.Host, opts.AllowInsecure); err != nil {
		return nil, fmt.Errorf("%s: %w", context, err)
	}
	cfg = rest.CopyConfig(cfg)
	exec := *cfg.ExecProvider
	exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
	cfg.ExecProvider = &exec
	return finish(cfg, context, 1, opts), nil
}

// finish sets what every member config has, whatever its source: the
// member's QPS and burst, the user agent, the environment's proxy, the
// guarded dialer, the request bound, and the guard of its answers (no
// redirect, bounded bodies).
func finish(cfg *rest.Config, context string, contexts int, opts ConfigOptions) *Config {
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
	cfg.Dial = Dialer(opts.AllowLinkLocal).DialContext
	maxBytes := opts.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	// Directly above net/http's Transport, in every client built from cfg
	// (informers and discovery included): see answerGuard.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		boundHeaders(rt)
		return &answerGuard{maxBytes: maxBytes, proxy: cfg.Proxy, allowLinkLocal: opts.AllowLinkLocal, next: rt}
	})
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, WarningLogger(logr.Logger{})
	timeout := opts.RequestTimeout
	if timeout == 0 {
		timeout = DefaultRequestTimeout
	}
	return &Config{REST: cfg, Context: context, Contexts: contexts, RequestTimeout: timeout, TokenExpiry: jwtExpiry(cfg.BearerToken)}
}

// Context is a kubeconfig context with the cluster and user it names.
type Context struct {
	Name    string
	Cluster *clientcmdapi.Cluster
	// User is nil when the context names no user.
	User *clientcmdapi.AuthInfo
}

// CurrentContext resolves raw's current context: the one current-context
// names, or the only one when it names none. Its errors wrap
// ErrInvalidKubeconfig and quote names, never credentials.
func CurrentContext(raw *clientcmdapi.Config) (Context, error) {
	name := raw.CurrentContext
	if name == "" {
		switch len(raw.Contexts) {
		case 0:
			return Context{}, fmt.Errorf("%w: no contexts", ErrInvalidKubeconfig)
		case 1:
			for n := range raw.Contexts {
				name = n
			}
		default:
			return Context{}, fmt.Errorf("%w: %d contexts and no current-context", ErrInvalidKubeconfig, len(raw.Contexts))
		}
	}
	kctx, ok := raw.Contexts[name]
	if !ok || kctx == nil {
		return Context{}, fmt.Errorf("%w: current-context %q does not exist", ErrInvalidKubeconfig, name)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return Context{}, fmt.Errorf("%w: context %q names cluster %q, which does not exist", ErrInvalidKubeconfig, name, kctx.Cluster)
	}
	return Context{Name: name, Cluster: cluster, User: raw.AuthInfos[kctx.AuthInfo]}, nil
}

// refuseUnsafe refuses what would make the hub read a file of its own
// filesystem (a service account token, a key), send its requests elsewhere
// than the server, act as another identity, or trust any certificate. The
// -data forms of certificates and keys, tokens and basic credentials are data
// of the Secret itself and stay allowed.
func refuseUnsafe(cur Context, allowInsecure bool) error {
	c, u := cur.Cluster, cur.User
	if u == nil {
		u = &clientcmdapi.AuthInfo{}
	}
	for _, f := range []struct {
		set   bool
		field string
	}{
		{u.TokenFile != "", "users[].user.tokenFile"},
		{u.ClientCertificate != "", "users[].user.client-certificate"},
		{u.ClientKey != "", "users[].user.client-key"},
		{c.CertificateAuthority != "", "clusters[].cluster.certificate-authority"},
		{c.ProxyURL != "", "clusters[].cluster.proxy-url"},
		{u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0, "users[].user.as (impersonation)"},
		{c.InsecureSkipTLSVerify && !allowInsecure, "clusters[].cluster.insecure-skip-tls-verify (allowed only with --allow-insecure-members)"},
	} {
		if f.set {
			return fmt.Errorf("%w: %s is not allowed", ErrUnsafeKubeconfig, f.field)
		}
	}
	return checkServer(c.Server, allowInsecure)
}

// checkServer refuses a member's server URL that is not https:// (or
// http:// with allowInsecure), has no host, or carries credentials.
func checkServer(s string, allowInsecure bool) error {
	server, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: clusters[].cluster.server is not a URL", ErrInvalidKubeconfig)
	}
	switch {
	case server.Scheme == "https":
	case server.Scheme == "http" && allowInsecure:
	case server.Scheme == "http":
		return fmt.Errorf("%w: clusters[].cluster.server uses http:// (allowed only with --allow-insecure-members)", ErrUnsafeKubeconfig)
	default:
		return fmt.Errorf("%w: clusters[].cluster.server is not an https:// URL", ErrUnsafeKubeconfig)
	}
	if server.Host == "" {
		return fmt.Errorf("%w: clusters[].cluster.server has no host", ErrInvalidKubeconfig)
	}
	if server.User != nil {
		return fmt.Errorf("%w: clusters[].cluster.server carries credentials", ErrUnsafeKubeconfig)
	}
	return nil
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

// FirstLine is the first line of err's message: later lines of some
// client-go config errors quote file content.
func FirstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// jwtExpiry is the exp claim of token when it is a JWT, else zero. The
// signature is not checked: the member does that; this only says when the
// member will stop accepting it.
func jwtExpiry(token string) time.Time {
	payload, ok := JWTPayload(token)
	if !ok {
		return time.Time{}
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
}

// JWTPayload is the decoded payload of token when it has the form of a JWT.
func JWTPayload(token string) ([]byte, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return payload, err == nil
}

// SameServerAndIdentity reports whether o reaches the same server in the same
// way as c and differs at most in its bearer token, which then can be swapped
// in place (Member.SetToken) instead of engaging the member afresh.
func (c *Config) SameServerAndIdentity(o *Config) bool {
	a, b := *c.REST, *o.REST
	if a.BearerToken == "" || b.BearerToken == "" || a.ExecProvider != nil || b.ExecProvider != nil || a.AuthProvider != nil || b.AuthProvider != nil {
		return false
	}
	return a.Host == b.Host && a.APIPath == b.APIPath && a.Username == b.Username && a.Password == b.Password &&
		reflect.DeepEqual(a.TLSClientConfig, b.TLSClientConfig) && reflect.DeepEqual(a.Impersonate, b.Impersonate) &&
		a.QPS == b.QPS && a.Burst == b.Burst && a.UserAgent == b.UserAgent && c.RequestTimeout == o.RequestTimeout
}
