package fleet

import (
	"fmt"
	"path/filepath"

	"github.com/widgethub/widgethub/clusters/connect"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigFiles are the admin kubeconfig files of a fleet written by WriteKubeconfigs.
type KubeconfigFiles struct {
	// All holds every control plane as a context named after it, the hub current.
	All string
	// Each maps a control plane's name to a file with only its context (current).
	Each map[string]string
}

// WriteKubeconfigs writes (mode 0600) the fleet's admin kubeconfigs into dir, one per
// control plane and one with all of them, each context, cluster and user
// named after its control plane ("hub", "alpha", ...).
func (f *Fleet) WriteKubeconfigs(dir string) (*KubeconfigFiles, error) {
	files := &KubeconfigFiles{All: filepath.Join(dir, "fleet.kubeconfig"), Each: map[string]string{}}
	all := clientcmdapi.NewConfig()
	for _, cp := range append([]*ControlPlane{f.Hub}, f.Members...) {
		one, err := cp.namedKubeconfig()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, cp.Name+".kubeconfig")
		if err := clientcmd.WriteToFile(*one, path); err != nil {
			return nil, fmt.Errorf("write kubeconfig of %q: %w", cp.Name, err)
		}
		files.Each[cp.Name] = path
		all.Clusters[cp.Name] = one.Clusters[cp.Name]
		all.AuthInfos[cp.Name] = one.AuthInfos[cp.Name]
		all.Contexts[cp.Name] = one.Contexts[cp.Name]
	}
	all.CurrentContext = f.Hub.Name
	if err := clientcmd.WriteToFile(*all, files.All); err != nil {
		return nil, fmt.Errorf("write fleet kubeconfig: %w", err)
	}
	return files, nil
}

// namedKubeconfig is the admin kubeconfig with one context, cluster and user named cp.Name.
func (cp *ControlPlane) namedKubeconfig() (*clientcmdapi.Config, error) {
	raw, err := clientcmd.Load(cp.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of %q: %w", cp.Name, err)
	}
	cur, err := connect.CurrentContext(raw)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig of %q: %w", cp.Name, err)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[cp.Name] = cur.Cluster
	out.AuthInfos[cp.Name] = cur.User
	out.Contexts[cp.Name] = &clientcmdapi.Context{Cluster: cp.Name, AuthInfo: cp.Name}
	out.CurrentContext = cp.Name
	return out, nil
}
