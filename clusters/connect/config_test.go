package connect

import (
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	testToken = "s3cr3t-token-value"
	// secretPath stands for a file of the hub, e.g. its own service account token.
	secretPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	testCA     = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
)

func insecure(c *clientcmdapi.Config)  { c.Clusters["a"].InsecureSkipTLSVerify = true }
func plainHTTP(c *clientcmdapi.Config) { c.Clusters["a"].Server = "http://a.example:6443" }

// padded is a valid one-context kubeconfig of exactly size bytes: a YAML
// comment fills it up.
func padded(t testing.TB, size int) []byte {
	t.Helper()
	doc := kubeconfig(t, "a", []string{"a"}, nil)
	doc = append(doc, "\n#"...)
	if len(doc) > size {
		t.Fatalf("kubeconfig of %d bytes is larger than %d", len(doc), size)
	}
	return append(doc, strings.Repeat("x", size-len(doc))...)
}

// kubeconfig builds a kubeconfig document with one context per name in
// contexts, each pointing at its own server; edit may change it before encoding.
func kubeconfig(t testing.TB, current string, contexts []string, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, name := range contexts {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + name + ".example:6443"}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: testToken}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	if edit != nil {
		edit(cfg)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRESTConfig(t *testing.T) {
	exec := func(c *clientcmdapi.Config) {
		c.AuthInfos["a"].Token = ""
		c.AuthInfos["a"].Exec = &clientcmdapi.ExecConfig{Command: "steal-things", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	}
	authProvider := func(c *clientcmdapi.Config) {
		c.AuthInfos["a"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
	}
	tests := []struct {
		name        string
		data        []byte
		opts        ConfigOptions
		wantErr     error
		wantHost    string
		wantContext string
		wantQPS     float32
	}{
		{name: "garbage", data: []byte("\x00\x01 not yaml: ["), wantErr: ErrInvalidKubeconfig},
		{name: "empty document", data: []byte("apiVersion: v1\nkind: Config\n"), wantErr: ErrInvalidKubeconfig},
		{name: "one context, none current", data: kubeconfig(t, "", []string{"a"}, nil), wantHost: "https://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "several contexts use current", data: kubeconfig(t, "b", []string{"a", "b"}, nil), wantHost: "https://b.example:6443", wantContext: "b", wantQPS: DefaultQPS},
		{name: "several contexts, none current", data: kubeconfig(t, "", []string{"a", "b"}, nil), wantErr: ErrInvalidKubeconfig},
		{name: "current context missing", data: kubeconfig(t, "zzz", []string{"a"}, nil), wantErr: ErrInvalidKubeconfig},
		{name: "cluster missing", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { delete(c.Clusters, "a") }), wantErr: ErrInvalidKubeconfig},
		{name: "no server", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.Clusters["a"].Server = "" }), wantErr: ErrInvalidKubeconfig},
		{name: "exec refused", data: kubeconfig(t, "a", []string{"a"}, exec), wantErr: ErrExecPluginRefused},
		{name: "auth-provider refused", data: kubeconfig(t, "a", []string{"a"}, authProvider), wantErr: ErrExecPluginRefused},
		{name: "exec allowed by option", data: kubeconfig(t, "a", []string{"a"}, exec), opts: ConfigOptions{AllowCredentialPlugins: true}, wantHost: "https://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "tokenFile refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.AuthInfos["a"].TokenFile = secretPath }), wantErr: ErrUnsafeKubeconfig},
		{name: "client-certificate refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.AuthInfos["a"].ClientCertificate = secretPath }), wantErr: ErrUnsafeKubeconfig},
		{name: "client-key refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.AuthInfos["a"].ClientKey = secretPath }), wantErr: ErrUnsafeKubeconfig},
		{name: "certificate-authority refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.Clusters["a"].CertificateAuthority = secretPath }), wantErr: ErrUnsafeKubeconfig},
		{name: "proxy-url refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.Clusters["a"].ProxyURL = "http://" + secretPath }), wantErr: ErrUnsafeKubeconfig},
		{name: "impersonation refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.AuthInfos["a"].Impersonate = "system:admin" }), wantErr: ErrUnsafeKubeconfig},
		{name: "impersonated groups refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.AuthInfos["a"].ImpersonateGroups = []string{"system:masters"} }), wantErr: ErrUnsafeKubeconfig},
		{name: "skip TLS verify refused", data: kubeconfig(t, "a", []string{"a"}, insecure), wantErr: ErrUnsafeKubeconfig},
		{name: "skip TLS verify allowed by option", data: kubeconfig(t, "a", []string{"a"}, insecure), opts: ConfigOptions{AllowInsecure: true}, wantHost: "https://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "http server refused", data: kubeconfig(t, "a", []string{"a"}, plainHTTP), wantErr: ErrUnsafeKubeconfig},
		{name: "http server allowed by option", data: kubeconfig(t, "a", []string{"a"}, plainHTTP), opts: ConfigOptions{AllowInsecure: true}, wantHost: "http://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "unix server refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.Clusters["a"].Server = "unix://" + secretPath }), wantErr: ErrUnsafeKubeconfig},
		{name: "credentials in the server URL refused", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) {
			c.Clusters["a"].Server = "https://admin:" + testToken + "@a.example:6443"
		}), wantErr: ErrUnsafeKubeconfig},
		{name: "file paths of an unused context are not read, so not refused", data: kubeconfig(t, "a", []string{"a", "b"}, func(c *clientcmdapi.Config) { c.AuthInfos["b"].TokenFile = secretPath }), wantHost: "https://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "data forms allowed", data: kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) {
			c.Clusters["a"].CertificateAuthorityData = []byte(testCA)
		}), wantHost: "https://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "largest allowed size", data: padded(t, MaxKubeconfigBytes), wantHost: "https://a.example:6443", wantContext: "a", wantQPS: DefaultQPS},
		{name: "over the size limit", data: padded(t, MaxKubeconfigBytes+1), wantErr: ErrInvalidKubeconfig},
		{name: "qps option", data: kubeconfig(t, "a", []string{"a"}, nil), opts: ConfigOptions{QPS: 7, Burst: 9}, wantHost: "https://a.example:6443", wantContext: "a", wantQPS: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := RESTConfig(tc.data, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got error %v, want %v", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), secretPath) {
					t.Fatalf("error reveals a value of the kubeconfig: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if cfg.REST.Host != tc.wantHost || cfg.Context != tc.wantContext || cfg.REST.QPS != tc.wantQPS {
				t.Fatalf("got host %q context %q qps %v, want %q %q %v", cfg.REST.Host, cfg.Context, cfg.REST.QPS, tc.wantHost, tc.wantContext, tc.wantQPS)
			}
			if cfg.REST.Proxy == nil {
				t.Fatalf("Proxy unset: the member would share a cached transport")
			}
			if cfg.REST.Dial == nil {
				t.Fatalf("Dial unset: the destination guard would not run")
			}
		})
	}
}

// FuzzRESTConfig checks that no input panics the parser and that errors never
// quote the credential of the input.
func FuzzRESTConfig(f *testing.F) {
	f.Add(kubeconfig(f, "a", []string{"a"}, nil))
	f.Add(kubeconfig(f, "b", []string{"a", "b"}, nil))
	f.Add(kubeconfig(f, "", []string{"a", "b"}, nil))
	f.Add(kubeconfig(f, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.Clusters["a"].Server = "" }))
	f.Add([]byte("apiVersion: v1\nkind: Config\nusers:\n- name: x\n  user:\n    token: " + testToken + "\n"))
	f.Add([]byte("{"))
	for _, edit := range []func(*clientcmdapi.Config){
		func(c *clientcmdapi.Config) { c.AuthInfos["a"].TokenFile = secretPath },
		func(c *clientcmdapi.Config) { c.AuthInfos["a"].ClientKey = secretPath },
		func(c *clientcmdapi.Config) { c.Clusters["a"].CertificateAuthority = secretPath },
		func(c *clientcmdapi.Config) { c.Clusters["a"].ProxyURL = "http://proxy.example" },
		insecure, plainHTTP,
	} {
		f.Add(kubeconfig(f, "a", []string{"a"}, edit))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := RESTConfig(data, ConfigOptions{})
		if err != nil {
			if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), secretPath) {
				t.Fatalf("error reveals a value of the kubeconfig: %v", err)
			}
			return
		}
		if cfg.REST == nil || cfg.REST.Host == "" {
			t.Fatalf("accepted a kubeconfig without a server: %+v", cfg)
		}
		// Whatever was accepted reads no file, uses no proxy, impersonates no
		// one and verifies TLS.
		r := cfg.REST
		if r.BearerTokenFile != "" || r.CertFile != "" || r.KeyFile != "" || r.CAFile != "" ||
			r.Impersonate.UserName != "" || len(r.Impersonate.Groups) > 0 || r.Insecure || r.ExecProvider != nil || r.AuthProvider != nil {
			t.Fatalf("accepted an unsafe kubeconfig: %+v", r)
		}
		if u, err := url.Parse(r.Host); err != nil || u.Scheme != "https" {
			t.Fatalf("accepted a server that is not https: %q", r.Host)
		}
	})
}

func TestDialerRefusesLinkLocalAndMetadataAddresses(t *testing.T) {
	for _, tc := range []struct {
		address string
		refused bool
	}{
		{"169.254.169.254:80", true},
		{"169.254.0.1:6443", true},
		{"[fe80::1]:443", true},
		{"[fe80::1%eth0]:443", true},
		{"[fd00:ec2::254]:80", true},
		{"[::ffff:169.254.169.254]:80", true},
		{"100.100.100.200:80", true},
		{"192.0.0.192:80", true},
		{"127.0.0.1:6443", false},
		{"[::1]:6443", false},
		{"10.0.0.1:6443", false},
		{"172.18.0.2:6443", false},
		{"192.168.1.10:6443", false},
		{"[fd00:ec2::253]:80", false},
		{"8.8.8.8:443", false},
		// IPv6 forms a translator or relay delivers to an IPv4 address.
		{"[64:ff9b::a9fe:a9fe]:80", true},             // NAT64, well-known prefix: 169.254.169.254
		{"[64:ff9b::6464:64c8]:80", true},             // NAT64: 100.100.100.200
		{"[64:ff9b::a00:1]:6443", false},              // NAT64: 10.0.0.1
		{"[64:ff9b:1:a9fe:a9:fe00::]:80", true},       // local-use NAT64 at /48: 169.254.169.254
		{"[64:ff9b:1::a9fe:a9fe]:80", true},           // local-use NAT64 at /96
		{"[64:ff9b:1::a00:1]:6443", false},            // local-use NAT64 at /96: 10.0.0.1
		{"[::a9fe:a9fe]:80", true},                    // IPv4-compatible: 169.254.169.254
		{"[::ffff:0:a9fe:a9fe]:80", true},             // SIIT IPv4-translated: 169.254.169.254
		{"[::ffff:0:a00:1]:6443", false},              // SIIT: 10.0.0.1
		{"[2002:a9fe:a9fe::1]:80", true},              // 6to4: 169.254.169.254
		{"[2002:a00:1::1]:6443", false},               // 6to4: 10.0.0.1
		{"[2001:0:4136:e378::5601:5601]:80", true},    // Teredo, client inverted: 169.254.169.254
		{"[2001:0:4136:e378::f5ff:fffe]:6443", false}, // Teredo: 10.0.0.1
		{"[2001:db8::a9fe:a9fe]:80", false},           // no prefix that carries IPv4
	} {
		err := refuseDestination("tcp", tc.address, nil)
		if refused := errors.Is(err, ErrDestinationRefused); refused != tc.refused {
			t.Errorf("%s: refused %v (%v), want %v", tc.address, refused, err, tc.refused)
		}
	}
}

// A connection to a refused address fails before anything is sent, whether
// the config names the address or a name that resolves to it; the guard sees
// what is actually dialled.
func TestMemberConfigDialsThroughTheGuard(t *testing.T) {
	for _, server := range []string{"https://169.254.169.254:6443", "https://[fe80::1]:6443"} {
		data := kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.Clusters["a"].Server = server })
		cfg, err := RESTConfig(data, ConfigOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cfg.REST.Dial(context.Background(), "tcp", strings.TrimPrefix(server, "https://"))
		if !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: dial error %v, want ErrDestinationRefused", server, err)
		}
		allowed, err := RESTConfig(data, ConfigOptions{AllowLinkLocal: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err = allowed.REST.Dial(ctx, "tcp", strings.TrimPrefix(server, "https://"))
		cancel()
		if errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: refused although AllowLinkLocal is set", server)
		}
	}
}

func TestTokenExpiryIsReadFromAJWT(t *testing.T) {
	jwt := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2lnbmF0dXJl"
	}
	for _, tc := range []struct {
		name, token string
		want        time.Time
	}{
		{"service account token", jwt(`{"exp":1893456000,"sub":"system:serviceaccount:widgethub-system:widgethub-member"}`), time.Unix(1893456000, 0)},
		{"no exp claim", jwt(`{"sub":"x"}`), time.Time{}},
		{"not base64", "a.!!!.c", time.Time{}},
		{"not JSON", jwt(`not json`), time.Time{}},
		{"opaque token", testToken, time.Time{}},
		{"no token", "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := kubeconfig(t, "a", []string{"a"}, func(c *clientcmdapi.Config) { c.AuthInfos["a"].Token = tc.token })
			cfg, err := RESTConfig(data, ConfigOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.TokenExpiry.Equal(tc.want) {
				t.Fatalf("TokenExpiry %v, want %v", cfg.TokenExpiry, tc.want)
			}
		})
	}
}
