package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// profileMember is the member the demo registers through a ClusterProfile;
// the others stay kubeconfig Secrets.
const profileMember = "beta"

// accessProviderName is the access provider of the demo's provider file.
const accessProviderName = "widgethub-tokens"

// clusterProfileCRD is the ClusterProfile CRD that cluster-inventory-api
// ships, from the module cache.
func clusterProfileCRD() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return "", fmt.Errorf("find sigs.k8s.io/cluster-inventory-api in the module cache: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "multicluster.x-k8s.io_clusterprofiles.yaml"), nil
}

// accessProvider is what the hub's administrator sets up for ClusterProfiles:
// the widgethub-credential plugin, built into dir, a token directory, and the
// provider file naming them.
type accessProvider struct {
	file, tokens string
}

func (d *demo) setUpAccessProvider(dir string) (*accessProvider, error) {
	plugin := filepath.Join(dir, "bin", "widgethub-credential")
	if out, err := exec.Command("go", "build", "-o", plugin, "github.com/widgethub/widgethub/cmd/widgethub-credential").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build widgethub-credential: %w: %s", err, out)
	}
	a := &accessProvider{file: filepath.Join(dir, "clusterprofile-providers.json"), tokens: filepath.Join(dir, "tokens")}
	data, err := json.MarshalIndent(map[string]any{"providers": []any{map[string]any{
		"name": accessProviderName,
		"execConfig": map[string]any{
			"apiVersion":         "client.authentication.k8s.io/v1",
			"command":            plugin,
			"args":               []string{"--token-dir=" + a.tokens},
			"provideClusterInfo": true,
		},
	}}}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(a.file, data, 0o600); err != nil {
		return nil, err
	}
	d.say("access provider %q for ClusterProfiles: %s (runs %s)", accessProviderName, a.file, plugin)
	return a, nil
}

// registerThroughClusterProfile moves the member name from its join Secret
// to a ClusterProfile: join prepared the member (CRD, ServiceAccount, RBAC)
// and minted a token; the token goes into the administrator's token
// directory, the Secret goes, and a ClusterProfile names the member's server
// and CA and the access provider, as a fleet manager would publish it.
func (d *demo) registerThroughClusterProfile(ctx context.Context, a *accessProvider, name string) error {
	secret := &corev1.Secret{}
	if err := d.fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: registration.DefaultNamespace, Name: name}, secret); err != nil {
		return fmt.Errorf("read the registration of %s: %w", name, err)
	}
	cfg, err := clusters.RESTConfig(secret.Data[registration.SecretKey], clusters.ConfigOptions{})
	if err != nil {
		return fmt.Errorf("the registration of %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Join(a.tokens, name), 0o700); err != nil {
		return err
	}
	for file, content := range map[string]string{"token": cfg.REST.BearerToken, "server": cfg.REST.Host} {
		if err := os.WriteFile(filepath.Join(a.tokens, name, file), []byte(content), 0o600); err != nil {
			return err
		}
	}
	d.say("%s: its token is in the administrator's token directory %s; replacing its Secret with a ClusterProfile", name, filepath.Join(a.tokens, name))
	if err := d.fleet.Hub.Client.Delete(ctx, secret); err != nil {
		return fmt.Errorf("delete the registration Secret of %s: %w", name, err)
	}
	if err := waitGone(ctx, d.fleet.Hub.Client, client.ObjectKey{Namespace: registration.DefaultNamespace, Name: name}); err != nil {
		return err
	}

	scheme := clusters.NewScheme()
	if err := inventoryv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	hub, err := client.New(d.fleet.Hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ext, _ := json.Marshal(map[string]string{"member": name})
	profile := &inventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: registration.DefaultNamespace, Name: name,
			Labels: map[string]string{inventoryv1alpha1.LabelClusterManagerKey: "widgethub-demo"}},
		Spec: inventoryv1alpha1.ClusterProfileSpec{DisplayName: name, ClusterManager: inventoryv1alpha1.ClusterManager{Name: "widgethub-demo"}},
	}
	if err := hub.Create(ctx, profile); err != nil {
		return fmt.Errorf("create the ClusterProfile of %s: %w", name, err)
	}
	profile.Status = inventoryv1alpha1.ClusterProfileStatus{Conditions: []metav1.Condition{}, AccessProviders: []inventoryv1alpha1.AccessProvider{{
		Name: accessProviderName,
		Cluster: clientcmdv1.Cluster{Server: cfg.REST.Host, CertificateAuthorityData: cfg.REST.CAData,
			Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: ext}}}},
	}}}
	if err := hub.Status().Update(ctx, profile); err != nil {
		return fmt.Errorf("write the ClusterProfile status of %s: %w", name, err)
	}
	d.say("ClusterProfile %s/%s created (server %s, access provider %q)", registration.DefaultNamespace, name, cfg.REST.Host, accessProviderName)
	return nil
}

// waitGone waits until the hub has removed the MemberCluster key.
func waitGone(ctx context.Context, hub client.Client, key client.ObjectKey) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := hub.Get(ctx, key, &v1alpha1.MemberCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the MemberCluster %s outlived its Secret: %w", key, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
