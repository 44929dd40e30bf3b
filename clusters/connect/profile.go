package connect

import (
	"errors"
	"fmt"
	"slices"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
)

// A ClusterProfile (SIG-Multicluster's Cluster Inventory API) holds no
// credentials: it names the member's server and CA, and access providers by
// name; the administrator's access provider file (--clusterprofile-provider-file,
// the JSON of cluster-inventory-api's pkg/access) says which exec plugin gets
// the credentials of each name. LoadAccessProviders reads that file and
// ProfileConfig joins the two into a member config. The hub's ClusterProfile
// source and kubectl widgethub both reach a profile's member this way.

// ErrNoAccessProvider is wrapped when a ClusterProfile names none of the
// access providers of the administrator's file: nothing is run.
var ErrNoAccessProvider = errors.New("no access provider")

// LoadAccessProviders reads the administrator's access provider file (the
// JSON of access.Config: {"providers": [{"name", "execConfig"}]}). It refuses
// a file with no provider, a provider without a name or a command, two
// providers of one name, and a provider whose profileSourcedCLIArgsPolicy or
// profileSourcedEnvVarsPolicy is other than Ignore: those let a
// ClusterProfile add arguments or environment variables (LD_PRELOAD, PATH,
// ...) to the command, and a registration must never decide what runs. Its
// errors name the file, as the flag --clusterprofile-provider-file gives it.
func LoadAccessProviders(path string) (*access.Config, error) {
	cfg, err := access.NewFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("--clusterprofile-provider-file: %w", err)
	}
	if len(cfg.Providers) == 0 {
		return nil, fmt.Errorf("--clusterprofile-provider-file %s: no providers", path)
	}
	seen := map[string]bool{}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %d has no name", path, i)
		case seen[p.Name]:
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: two providers named %q", path, p.Name)
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %q has no execConfig.command", path, p.Name)
		case p.ProfileSourcedCLIArgsPolicy != "" && p.ProfileSourcedCLIArgsPolicy != access.ProfileSourcedCLIArgsPolicyIgnore:
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %q: profileSourcedCLIArgsPolicy %q would let a ClusterProfile add arguments to its command; only %q is allowed",
				path, p.Name, p.ProfileSourcedCLIArgsPolicy, access.ProfileSourcedCLIArgsPolicyIgnore)
		case p.ProfileSourcedEnvVarsPolicy != "" && p.ProfileSourcedEnvVarsPolicy != access.ProfileSourcedEnvVarsPolicyIgnore:
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %q: profileSourcedEnvVarsPolicy %q would let a ClusterProfile set its command's environment; only %q is allowed",
				path, p.Name, p.ProfileSourcedEnvVarsPolicy, access.ProfileSourcedEnvVarsPolicyIgnore)
		}
		seen[p.Name] = true
		if p.ExecConfig.APIVersion == "" {
			p.ExecConfig.APIVersion = "client.authentication.k8s.io/v1"
		}
		p.ExecConfig.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
	}
	return cfg, nil
}

// ProfileConfig is the member config of profile with the providers of the
// administrator's file (LoadAccessProviders): access.Config.BuildConfigFromCP
// joins the server and CA of the profile's access provider with the exec
// plugin of the file's provider of that name, and ExecConfig checks the
// result as every member config is checked. Nothing the profile holds can
// name a command, an argument, an environment variable or a file:
// LoadAccessProviders refused the policies that would let its extensions add
// arguments or environment, and the cluster fields that would make the
// caller read a file, use a proxy or skip TLS verification are refused here
// (ErrUnsafeKubeconfig; the library would ignore some of them, silently). A
// profile naming none of the file's providers is ErrNoAccessProvider.
func ProfileConfig(profile *inventoryv1alpha1.ClusterProfile, providers *access.Config, opts ConfigOptions) (*Config, error) {
	provider, cluster := matchProvider(profile, providers)
	if cluster == nil {
		return nil, fmt.Errorf("%w: the ClusterProfile names the access providers %q, none of which the access provider file has (it has %q; see --clusterprofile-provider-file)",
			ErrNoAccessProvider, profileProviders(profile), providerNames(providers))
	}
	where := fmt.Sprintf("access provider %q", provider)
	for _, f := range []struct {
		set   bool
		field string
	}{
		{cluster.CertificateAuthority != "", "certificate-authority (a file; give certificate-authority-data)"},
		{cluster.ProxyURL != "", "proxy-url"},
		{cluster.InsecureSkipTLSVerify && !opts.AllowInsecure, "insecure-skip-tls-verify (allowed only with --allow-insecure-members)"},
	} {
		if f.set {
			return nil, fmt.Errorf("%s: %w: the cluster's %s is not allowed", where, ErrUnsafeKubeconfig, f.field)
		}
	}
	rest, err := providers.BuildConfigFromCP(profile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", where, ErrInvalidKubeconfig, FirstLine(err))
	}
	if rest.Host != cluster.Server {
		return nil, fmt.Errorf("%s: %w: the library chose another access provider", where, ErrInvalidKubeconfig)
	}
	rest.Insecure = cluster.InsecureSkipTLSVerify
	if rest.Insecure {
		rest.CAData = nil
	}
	rest.ServerName = cluster.TLSServerName
	return ExecConfig(rest, where, opts)
}

// matchProvider returns the first provider of the administrator's file that
// profile names, and the cluster profile gives for it (its accessProviders
// before the deprecated credentialProviders), as access.Config does.
func matchProvider(profile *inventoryv1alpha1.ClusterProfile, providers *access.Config) (string, *clientcmdv1.Cluster) {
	named := map[string]*clientcmdv1.Cluster{}
	for _, list := range [][]inventoryv1alpha1.AccessProvider{profile.Status.CredentialProviders, profile.Status.AccessProviders} {
		for i := range list {
			named[list[i].Name] = &list[i].Cluster
		}
	}
	for _, p := range providers.Providers {
		if cluster, ok := named[p.Name]; ok {
			return p.Name, cluster
		}
	}
	return "", nil
}

func providerNames(providers *access.Config) []string {
	names := make([]string, len(providers.Providers))
	for i, p := range providers.Providers {
		names[i] = p.Name
	}
	return names
}

func profileProviders(profile *inventoryv1alpha1.ClusterProfile) []string {
	var names []string
	for _, list := range [][]inventoryv1alpha1.AccessProvider{profile.Status.AccessProviders, profile.Status.CredentialProviders} {
		for _, p := range list {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	return names
}
