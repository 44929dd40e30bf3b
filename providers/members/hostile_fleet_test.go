package members_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// A registration whose server answers /version with a gzip bomb (1 GiB
// decompressed, about 1 MiB on the wire) is reported ResponseTooLarge, and
// meanwhile a healthy member's new Widget is reconciled within 2s.
func TestGzipBombMemberIsReported(t *testing.T) {
	gamma, beta := testFleet.Member("gamma"), testFleet.Member("beta")
	hubtest.RegisterEngaged(t, "beta", beta)

	front, err := fleet.NewHTTPProxy(gamma.Config.Host, gamma.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.Set(fleet.Fault{Answer: fleet.GzipBomb(`{"major":"1","gitVersion":"v1.`, 1<<30),
		Match: func(r *http.Request) bool { return r.URL.Path == "/version" }})
	kubeconfig := hubtest.FrontKubeconfig(t, front, gamma, "widgethub-hostile")

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	hubtest.RegisterData(t, "bomb", map[string][]byte{"kubeconfig": kubeconfig})
	t.Cleanup(func() { hubtest.Unregister(t, "bomb") })
	hubtest.ExpectMemberReady(t, "bomb", metav1.ConditionFalse, v1alpha1.MemberResponseTooLargeReason, "larger than 4096 bytes")

	// Beta's new Widget is reconciled while the bomb's member is reported.
	key := hubtest.CreateShopWidget(t, beta, "after-bomb", 1)
	start := time.Now()
	NewWithT(t).Eventually(func(g Gomega) {
		hubtest.Deployment(g, beta, key)
	}, 2*time.Second, 20*time.Millisecond).Should(Succeed(), "beta's new Widget was not reconciled within 2s")
	_, faulted := front.Requests()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("beta's Widget reconciled in %s; the bomb was served %d times; heap in use after GC %.1f MiB, before %.1f MiB",
		time.Since(start).Round(time.Millisecond), faulted, float64(after.HeapInuse)/(1<<20), float64(before.HeapInuse)/(1<<20))
	// The bomb decompresses to 1 GiB: read whole, it alone would take more.
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 256<<20 {
		t.Errorf("the process allocated %d MiB while the bomb was served %d times", grown>>20, faulted)
	}
}
