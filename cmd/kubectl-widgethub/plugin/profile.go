package plugin

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	"github.com/widgethub/widgethub/clusters/connect"
)

// profileMembers are the members the ClusterProfiles of the hub register, as
// the hub reads them: a profile being deleted registers none, and a name in
// taken (a registration Secret's) is the Secret's. A hub that does not serve
// ClusterProfiles has none.
func (g *globals) profileMembers(ctx context.Context, hub *cluster, providers *access.Config, taken map[string]bool) ([]reachable, error) {
	var list inventoryv1alpha1.ClusterProfileList
	err := hub.client.List(ctx, &list, listOptions{namespace: g.profileNamespace()})
	switch {
	case meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("hub: list ClusterProfiles in %s: %w", g.profileNamespace(), err)
	}
	var members []reachable
	for i := range list.Items {
		p := &list.Items[i]
		if taken[p.Name] || !p.DeletionTimestamp.IsZero() {
			continue
		}
		role := fmt.Sprintf("ClusterProfile %s/%s", p.Namespace, p.Name)
		members = append(members, reachable{name: p.Name, role: role, config: func() (*connect.Config, error) {
			return profileConfig(p, role, providers)
		}})
	}
	return members, nil
}

// profileConfig is the config of p's member with the administrator's
// providers, checked as the hub checks it (connect.ProfileConfig, with the
// hub's defaults: no insecure-skip-tls-verify), or why there is none.
func profileConfig(p *inventoryv1alpha1.ClusterProfile, role string, providers *access.Config) (*connect.Config, error) {
	if providers == nil {
		return nil, withCode(ExitKubeconfig, "registered by the %s, which holds no credentials: the hub reaches it through its administrator's "+
			"access provider file; pass that file with --clusterprofile-provider-file to reach it the same way", role)
	}
	cfg, err := connect.ProfileConfig(p, providers, connect.ConfigOptions{UserAgent: userAgent})
	if err != nil {
		return nil, withCode(ExitKubeconfig, "%s refused: %w", role, err)
	}
	return cfg, nil
}
