package clusters

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const testToken = "s3cr3t-token-value"

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
		{name: "qps option", data: kubeconfig(t, "a", []string{"a"}, nil), opts: ConfigOptions{QPS: 7, Burst: 9}, wantHost: "https://a.example:6443", wantContext: "a", wantQPS: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := RESTConfig(tc.data, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got error %v, want %v", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testToken) {
					t.Fatalf("error reveals the token: %v", err)
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
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := RESTConfig(data, ConfigOptions{})
		if err != nil {
			if strings.Contains(err.Error(), testToken) {
				t.Fatalf("error reveals the token: %v", err)
			}
			return
		}
		if cfg.REST == nil || cfg.REST.Host == "" {
			t.Fatalf("accepted a kubeconfig without a server: %+v", cfg)
		}
	})
}
