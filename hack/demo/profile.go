package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// profileMember is the member the demo registers through a ClusterProfile;
// the others stay kubeconfig Secrets.
const profileMember = "beta"

// accessProviderName is the access provider of the demo's provider file.
const accessProviderName = "widgethub-tokens"

// setUpAccessProvider sets up what the hub's administrator sets up for
// ClusterProfiles: the widgethub-credential plugin, built into dir, a token
// directory, and the provider file naming them.
func (d *demo) setUpAccessProvider(dir string) (*fleet.AccessProvider, error) {
	a, err := fleet.NewAccessProvider(dir, accessProviderName)
	if err != nil {
		return nil, err
	}
	d.say("access provider %q for ClusterProfiles: %s (runs widgethub-credential, tokens in %s)", a.Name, a.File, a.Tokens)
	return a, nil
}

// registerThroughClusterProfile moves the member name from its join Secret
// to a ClusterProfile: join prepared the member (CRD, ServiceAccount, RBAC)
// and minted a token; the token goes into the administrator's token
// directory, the Secret goes, and a ClusterProfile names the member's server
// and CA and the access provider, as a fleet manager would publish it.
func (d *demo) registerThroughClusterProfile(ctx context.Context, a *fleet.AccessProvider, name string) error {
	secret := &corev1.Secret{}
	if err := d.fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: registration.DefaultNamespace, Name: name}, secret); err != nil {
		return fmt.Errorf("read the registration of %s: %w", name, err)
	}
	cfg, err := connect.RESTConfig(secret.Data[registration.SecretKey], connect.ConfigOptions{})
	if err != nil {
		return fmt.Errorf("the registration of %s: %w", name, err)
	}
	if err := a.Grant(name, cfg.REST.Host, cfg.REST.BearerToken); err != nil {
		return err
	}
	d.say("%s: its token is in the administrator's token directory %s; replacing its Secret with a ClusterProfile", name, filepath.Join(a.Tokens, name))
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
	if err := fleet.CreateClusterProfile(ctx, hub, registration.DefaultNamespace, name, fleet.ProfileEntry(a.Name, name, cfg.REST.Host, cfg.REST.CAData)); err != nil {
		return err
	}
	d.say("ClusterProfile %s/%s created (server %s, access provider %q)", registration.DefaultNamespace, name, cfg.REST.Host, a.Name)
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
