package connect

import (
	"errors"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestExecConfig(t *testing.T) {
	base := func(edit func(*rest.Config)) *rest.Config {
		cfg := &rest.Config{Host: "https://member.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte(testCA)},
			ExecProvider: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/usr/local/bin/plugin"}}
		if edit != nil {
			edit(cfg)
		}
		return cfg
	}
	for _, tc := range []struct {
		name    string
		cfg     *rest.Config
		opts    ConfigOptions
		wantErr error
	}{
		{"an exec provider and a server", base(nil), ConfigOptions{}, nil},
		{"no exec provider", base(func(c *rest.Config) { c.ExecProvider = nil }), ConfigOptions{}, ErrInvalidKubeconfig},
		{"a token besides", base(func(c *rest.Config) { c.BearerToken = testToken }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"a token file", base(func(c *rest.Config) { c.BearerTokenFile = secretPath }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"a CA file", base(func(c *rest.Config) { c.CAFile = secretPath }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"impersonation", base(func(c *rest.Config) { c.Impersonate.UserName = "system:admin" }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"skipped TLS verification", base(func(c *rest.Config) { c.Insecure = true }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"skipped TLS verification, allowed", base(func(c *rest.Config) { c.Insecure, c.CAData = true, nil }), ConfigOptions{AllowInsecure: true}, nil},
		{"plain http", base(func(c *rest.Config) { c.Host = "http://member.example" }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"credentials in the URL", base(func(c *rest.Config) { c.Host = "https://u:p@member.example" }), ConfigOptions{}, ErrUnsafeKubeconfig},
		{"no host", base(func(c *rest.Config) { c.Host = "https://" }), ConfigOptions{}, ErrInvalidKubeconfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExecConfig(tc.cfg, "access provider \"p\"", tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.REST.Dial == nil || got.REST.Proxy == nil || got.REST.QPS != DefaultQPS || got.RequestTimeout != DefaultRequestTimeout {
				t.Fatalf("not finished as a member config: %+v", got.REST)
			}
			if got.REST.ExecProvider.InteractiveMode != clientcmdapi.NeverExecInteractiveMode || tc.cfg.ExecProvider.InteractiveMode != "" {
				t.Fatalf("interactive mode %q (the given config's %q)", got.REST.ExecProvider.InteractiveMode, tc.cfg.ExecProvider.InteractiveMode)
			}
		})
	}
}
