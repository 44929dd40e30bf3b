package members

import (
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// A registration of a later source whose reconcile was on its way when a
// registration of an earlier source took the name makes no member: the
// member is made for the registration that holds the name, with its own
// kubeconfig. (Before claims and members shared one lock, the ClusterProfile
// twin of a Secret was engaged with its own credentials for seconds on a
// sharded hub, until the Secret's reconcile came around again.)
func TestRegistryServesOnlyTheRegistrationThatHoldsTheName(t *testing.T) {
	r := newRegistry()
	secrets, profiles := &sourceController{index: 0}, &sourceController{index: 1}
	const name = multicluster.ClusterName("twin")
	profile := claim{source: profiles, key: types.NamespacedName{Namespace: "ns", Name: "twin"}}
	secret := claim{source: secrets, key: types.NamespacedName{Namespace: "ns", Name: "twin"}}
	made := 0
	newMember := func() *member { made++; return newMember(name, &memberEnv{}, logr.Discard()) }

	if c := r.claim(name, profile); !c.held {
		t.Fatalf("the first registration of %s does not hold it: %+v", name, c)
	}
	// The Secret takes the name before the ClusterProfile's reconcile serves it.
	if c := r.claim(name, secret); !c.held || c.displaced == nil || *c.displaced != profile {
		t.Fatalf("the Secret does not take the name from the ClusterProfile: %+v", c)
	}
	if m, err := r.serve(name, profile, newMember); m != nil || err != nil {
		t.Errorf("the ClusterProfile that lost the name is served a member (error %v)", err)
	}
	m, err := r.serve(name, secret, newMember)
	if m == nil || err != nil {
		t.Fatalf("the Secret that holds the name is served no member (%v)", err)
	}
	if again, _ := r.serve(name, secret, newMember); again != m || made != 1 {
		t.Errorf("serving the holder again made another member (%d made)", made)
	}
	r.close()
	if m, err := r.serve(name, secret, newMember); m != nil || err == nil {
		t.Errorf("a closing registry serves a member (error %v)", err)
	}
}
