package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Members registered by ClusterProfiles (the Cluster Inventory API): the
// CRD installed on the hub, and the access provider a hub's administrator
// sets up, whose plugin is cmd/widgethub-credential.

// execExtension is the cluster extension that reaches an exec plugin in
// KUBERNETES_EXEC_INFO; widgethub-credential reads the member's name there.
const execExtension = "client.authentication.k8s.io/exec"

// ClusterProfileCRD is the path of cluster-inventory-api's ClusterProfile
// CRD in the module cache.
func ClusterProfileCRD() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return "", fmt.Errorf("find sigs.k8s.io/cluster-inventory-api in the module cache: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "multicluster.x-k8s.io_clusterprofiles.yaml"), nil
}

// InstallClusterProfileCRD installs the ClusterProfile CRD
// (ClusterProfileCRD) on the API server at cp.
func (cp *ControlPlane) InstallClusterProfileCRD() error {
	crd, err := ClusterProfileCRD()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("install the ClusterProfile CRD: %w", err)
	}
	return nil
}

// AccessProvider is the access provider of a hub's administrator for
// members registered by ClusterProfiles: the widgethub-credential plugin,
// its token directory, and the provider file (--clusterprofile-provider-file)
// that names the command to run.
type AccessProvider struct {
	// Name is the provider's name, which ClusterProfiles name too.
	Name string
	// File is the provider file; Tokens the plugin's token directory;
	// Plugin the widgethub-credential binary.
	File, Tokens, Plugin string
}

// NewAccessProvider writes into dir a provider file whose provider name
// runs widgethub-credential (CredentialPlugin) with a token directory of dir.
func NewAccessProvider(dir, name string) (*AccessProvider, error) {
	plugin, err := CredentialPlugin()
	if err != nil {
		return nil, err
	}
	a := &AccessProvider{Name: name, File: filepath.Join(dir, "clusterprofile-providers.json"), Tokens: filepath.Join(dir, "tokens"), Plugin: plugin}
	return a, a.Runs(plugin)
}

// Runs makes the provider run command (given the plugin's arguments)
// instead: a wrapper of the plugin, say.
func (a *AccessProvider) Runs(command string) error {
	data, err := json.MarshalIndent(map[string]any{"providers": []any{map[string]any{
		"name": a.Name,
		"execConfig": map[string]any{
			"apiVersion":         "client.authentication.k8s.io/v1",
			"command":            command,
			"args":               []string{"--token-dir=" + a.Tokens},
			"provideClusterInfo": true,
		},
	}}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(a.File, data, 0o600)
}

// Grant puts token into the token directory for the member called member,
// bound to server: the plugin hands it out for that server only.
func (a *AccessProvider) Grant(member, server, token string) error {
	if err := os.MkdirAll(filepath.Join(a.Tokens, member), 0o700); err != nil {
		return err
	}
	for file, content := range map[string]string{"token": token, "server": server} {
		if err := os.WriteFile(filepath.Join(a.Tokens, member, file), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Entry is the access provider entry of a ClusterProfile that reaches the
// member called member at cp through this provider.
func (a *AccessProvider) Entry(member string, cp *ControlPlane) inventoryv1alpha1.AccessProvider {
	return ProfileEntry(a.Name, member, cp.Config.Host, cp.Config.CAData)
}

// ProfileEntry is the access provider entry of a ClusterProfile that names
// provider and reaches the member called member at server, whose CA is
// caData, its exec extension naming the member.
func ProfileEntry(provider, member, server string, caData []byte) inventoryv1alpha1.AccessProvider {
	ext, _ := json.Marshal(map[string]string{"member": member})
	return inventoryv1alpha1.AccessProvider{Name: provider, Cluster: clientcmdv1.Cluster{
		Server:                   server,
		CertificateAuthorityData: caData,
		Extensions:               []clientcmdv1.NamedExtension{{Name: execExtension, Extension: runtime.RawExtension{Raw: ext}}},
	}}
}

// CreateClusterProfile creates the ClusterProfile namespace/name through c
// (whose scheme knows ClusterProfiles) with the access providers of its
// status, as a fleet manager publishes it.
func CreateClusterProfile(ctx context.Context, c client.Client, namespace, name string, providers ...inventoryv1alpha1.AccessProvider) error {
	profile := &inventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       inventoryv1alpha1.ClusterProfileSpec{DisplayName: name, ClusterManager: inventoryv1alpha1.ClusterManager{Name: "widgethub-fleet"}},
	}
	if err := c.Create(ctx, profile); err != nil {
		return fmt.Errorf("create ClusterProfile %s/%s: %w", namespace, name, err)
	}
	profile.Status = inventoryv1alpha1.ClusterProfileStatus{Conditions: []metav1.Condition{}, AccessProviders: providers}
	if err := c.Status().Update(ctx, profile); err != nil {
		return fmt.Errorf("write the status of ClusterProfile %s/%s: %w", namespace, name, err)
	}
	return nil
}
