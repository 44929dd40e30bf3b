package connect_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/widgethub/widgethub/clusters/connect"
)

func writeProviderFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const adminFile = `{"providers": [
  {"name": "tokens", "execConfig": {"command": "/usr/local/bin/widgethub-credential",
    "args": ["--token-dir=/etc/widgethub/tokens"], "env": [{"name": "A", "value": "admin"}], "provideClusterInfo": true}},
  {"name": "other", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "other-plugin"}}]}`

func TestLoadAccessProviders(t *testing.T) {
	for _, tc := range []struct {
		name, content, wantErr string
	}{
		{"the administrator's file", adminFile, ""},
		{"explicit Ignore policies", `{"providers": [{"name": "a", "execConfig": {"command": "x"}, "profileSourcedCLIArgsPolicy": "Ignore", "profileSourcedEnvVarsPolicy": "Ignore"}]}`, ""},
		{"profile arguments appended", `{"providers": [{"name": "a", "execConfig": {"command": "x"}, "profileSourcedCLIArgsPolicy": "Append"}]}`, "add arguments"},
		{"profile environment", `{"providers": [{"name": "a", "execConfig": {"command": "x"}, "profileSourcedEnvVarsPolicy": "AppendIfNotExists"}]}`, "environment"},
		{"profile environment replacing", `{"providers": [{"name": "a", "execConfig": {"command": "x"}, "profileSourcedEnvVarsPolicy": "Replace"}]}`, "environment"},
		{"no command", `{"providers": [{"name": "a", "execConfig": {}}]}`, "no execConfig.command"},
		{"no execConfig", `{"providers": [{"name": "a"}]}`, "no execConfig.command"},
		{"no name", `{"providers": [{"execConfig": {"command": "x"}}]}`, "no name"},
		{"two of one name", `{"providers": [{"name": "a", "execConfig": {"command": "x"}}, {"name": "a", "execConfig": {"command": "y"}}]}`, "two providers"},
		{"no providers", `{"providers": []}`, "no providers"},
		{"not JSON", `providers: []`, "unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := connect.LoadAccessProviders(writeProviderFile(t, tc.content))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range cfg.Providers {
				if p.ExecConfig.APIVersion == "" || p.ExecConfig.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
					t.Fatalf("provider %q: apiVersion %q, interactive mode %q", p.Name, p.ExecConfig.APIVersion, p.ExecConfig.InteractiveMode)
				}
			}
		})
	}
}

func profileWith(providers ...inventoryv1alpha1.AccessProvider) *inventoryv1alpha1.ClusterProfile {
	p := &inventoryv1alpha1.ClusterProfile{}
	p.Name, p.Namespace = "member", "widgethub-system"
	p.Status.AccessProviders = providers
	return p
}

func profileCluster(edit func(*clientcmdv1.Cluster)) clientcmdv1.Cluster {
	c := clientcmdv1.Cluster{Server: "https://member.example:6443", CertificateAuthorityData: []byte("ca"),
		Extensions: []clientcmdv1.NamedExtension{
			{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: []byte(`{"member":"member"}`)}},
			// What KEP 5339 lets a profile add, when the administrator allows it.
			{Name: "clusterprofiles.multicluster.x-k8s.io/exec/additional-args", Extension: runtime.RawExtension{Raw: []byte(`["--token-dir=/", "--evil"]`)}},
			{Name: "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs", Extension: runtime.RawExtension{Raw: []byte(`{"LD_PRELOAD": "/tmp/x.so", "A": "profile"}`)}},
		}}
	if edit != nil {
		edit(&c)
	}
	return c
}

func TestProfileConfigRunsOnlyTheAdministratorsCommand(t *testing.T) {
	access, err := connect.LoadAccessProviders(writeProviderFile(t, adminFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		providers []inventoryv1alpha1.AccessProvider
		wantErr   error
		command   string
	}{
		{"a provider of the file", []inventoryv1alpha1.AccessProvider{{Name: "tokens", Cluster: profileCluster(nil)}}, nil, "/usr/local/bin/widgethub-credential"},
		{"the file's first provider the profile names", []inventoryv1alpha1.AccessProvider{
			{Name: "other", Cluster: profileCluster(nil)}, {Name: "tokens", Cluster: profileCluster(nil)}}, nil, "/usr/local/bin/widgethub-credential"},
		{"only providers the file lacks", []inventoryv1alpha1.AccessProvider{{Name: "theirs", Cluster: profileCluster(nil)}}, connect.ErrNoAccessProvider, ""},
		{"no providers", nil, connect.ErrNoAccessProvider, ""},
		{"a CA file", []inventoryv1alpha1.AccessProvider{{Name: "tokens", Cluster: profileCluster(func(c *clientcmdv1.Cluster) { c.CertificateAuthority = "/etc/shadow" })}}, connect.ErrUnsafeKubeconfig, ""},
		{"a proxy", []inventoryv1alpha1.AccessProvider{{Name: "tokens", Cluster: profileCluster(func(c *clientcmdv1.Cluster) { c.ProxyURL = "http://proxy:3128" })}}, connect.ErrUnsafeKubeconfig, ""},
		{"skipped TLS verification", []inventoryv1alpha1.AccessProvider{{Name: "tokens", Cluster: profileCluster(func(c *clientcmdv1.Cluster) { c.InsecureSkipTLSVerify = true })}}, connect.ErrUnsafeKubeconfig, ""},
		{"plain http", []inventoryv1alpha1.AccessProvider{{Name: "tokens", Cluster: profileCluster(func(c *clientcmdv1.Cluster) { c.Server = "http://member.example" })}}, connect.ErrUnsafeKubeconfig, ""},
		{"credentials in the URL", []inventoryv1alpha1.AccessProvider{{Name: "tokens", Cluster: profileCluster(func(c *clientcmdv1.Cluster) { c.Server = "https://u:p@member.example" })}}, connect.ErrUnsafeKubeconfig, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := connect.ProfileConfig(profileWith(tc.providers...), access, connect.ConfigOptions{})
			if tc.wantErr != nil {
				switch {
				case err == nil:
					t.Fatalf("engaged %s", cfg.REST.Host)
				case !errors.Is(err, tc.wantErr):
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			exec := cfg.REST.ExecProvider
			if exec.Command != tc.command || !reflect.DeepEqual(exec.Args, []string{"--token-dir=/etc/widgethub/tokens"}) ||
				!reflect.DeepEqual(exec.Env, []clientcmdapi.ExecEnvVar{{Name: "A", Value: "admin"}}) {
				t.Fatalf("the profile changed the command: %q %q %v", exec.Command, exec.Args, exec.Env)
			}
			if !exec.ProvideClusterInfo || string(exec.Config.(*runtime.Unknown).Raw) != `{"member":"member"}` {
				t.Fatalf("cluster info: %v %v", exec.ProvideClusterInfo, exec.Config)
			}
			if cfg.REST.Host != "https://member.example:6443" || string(cfg.REST.CAData) != "ca" || cfg.REST.Dial == nil {
				t.Fatalf("server %q, CA %q, dialer set %v", cfg.REST.Host, cfg.REST.CAData, cfg.REST.Dial != nil)
			}
			// The administrator's file is as it was: nothing of the profile was merged into it.
			if got := access.Providers[0].ExecConfig; len(got.Args) != 1 || len(got.Env) != 1 {
				t.Fatalf("the provider file changed: %q %v", got.Args, got.Env)
			}
		})
	}
}
