package members_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// cacheLists matches the lists and watches of a member's cache, not the
// preflight's list of one object: a member behind a front that black-holes
// them passes its checks and then hangs in its cache sync.
func cacheLists(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/apis/") && strings.Count(r.URL.Path, "/") >= 4 &&
		r.URL.Query().Get("limit") != "1"
}

// A registration deleted while its engagement hangs in its cache sync frees
// its worker at once: the sync's lists end (the front holds none) within
// freedWithin of the deletion, not at the sync timeout, and its
// MemberCluster goes. Nothing else wants a worker meanwhile, so no reclaim
// could free it.
func TestDeletedRegistrationFreesItsWorkerAtOnce(t *testing.T) {
	const freedWithin = 2 * time.Second
	opts := engineOptions()
	if opts.SyncTimeout < 3*freedWithin {
		t.Fatalf("the sync timeout %s is too short to tell a cut engagement from one that timed out", opts.SyncTimeout)
	}
	alpha := testFleet.Member("alpha")
	front, err := fleet.NewHTTPProxy(alpha.Config.Host, alpha.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.Set(fleet.Fault{BlackHole: true, Match: cacheLists})
	name := "deleted-while-hanging-" + hubtest.RandomHex(t)[:6]
	hubtest.RegisterData(t, name, map[string][]byte{"kubeconfig": hubtest.FrontKubeconfig(t, front, alpha, "widgethub-deleted")})

	g := NewWithT(t)
	g.Eventually(func() []string { return front.Held() }, hubtest.Within, hubtest.Poll).ShouldNot(BeEmpty(),
		"the engagement's cache lists held by the front")
	hubtest.Unregister(t, name)
	deleted := time.Now()
	g.Eventually(func() []string { return front.Held() }, opts.SyncTimeout, 20*time.Millisecond).Should(BeEmpty(),
		"the deleted registration's cache lists")
	freed := time.Since(deleted)
	t.Logf("the deleted registration's engagement ended %s after the deletion (sync timeout %s)", freed.Round(time.Millisecond), opts.SyncTimeout)
	if freed > freedWithin {
		t.Errorf("the engagement of a deleted registration ended %s after the deletion, more than %s", freed.Round(time.Millisecond), freedWithin)
	}
	hubtest.ExpectUnregistered(t, name)
}
