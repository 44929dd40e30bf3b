package clusterprofile

import (
	"errors"
	"testing"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/members"
)

// The profile's config is connect.ProfileConfig's (its tests are in
// clusters/connect/profile_test.go); the source adds the Ready reason of a profile
// naming none of the administrator's providers.
func TestConfigRefusesAProfileWithoutTheHubsProvider(t *testing.T) {
	s := New(Options{Namespace: "widgethub-system", Access: access.New([]access.Provider{{Name: "tokens"}})}, nil)
	profile := func(provider string, cluster clientcmdv1.Cluster) *inventoryv1alpha1.ClusterProfile {
		p := &inventoryv1alpha1.ClusterProfile{}
		p.Status.AccessProviders = []inventoryv1alpha1.AccessProvider{{Name: provider, Cluster: cluster}}
		return p
	}
	var refusal *members.Refusal
	_, err := s.config(profile("theirs", clientcmdv1.Cluster{Server: "https://member.example"}))
	if !errors.As(err, &refusal) || refusal.Reason != v1alpha1.MemberNoAccessProviderReason || !errors.Is(err, connect.ErrNoAccessProvider) {
		t.Errorf("a profile naming only providers the hub lacks: %v, want a refusal %s", err, v1alpha1.MemberNoAccessProviderReason)
	}
	// Other errors keep their own reason (UnsafeKubeconfig here, by members).
	_, err = s.config(profile("tokens", clientcmdv1.Cluster{Server: "https://member.example", ProxyURL: "http://proxy:3128"}))
	if errors.As(err, &refusal) || !errors.Is(err, connect.ErrUnsafeKubeconfig) {
		t.Errorf("a profile with a proxy: %v, want an unsafe kubeconfig error that is no refusal", err)
	}
}
