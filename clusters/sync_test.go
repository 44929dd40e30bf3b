package clusters_test

import (
	"testing"
	"time"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// StartAndSync returns once the caches hold what the member has, with or
// without a bound: controller-runtime's GetInformer does not wait when it
// is called before the cache, started in a goroutine, has marked itself
// started.
func TestStartAndSyncReturnsWithTheCachesFilled(t *testing.T) {
	cp := startMember(t)
	ctx := t.Context()
	const n = 300
	if err := fleet.CreateWidgets(ctx, cp.Client, "filled", "w", n, 8); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{0, 1000} {
		m := boundedMember(t, cp, max)
		if err := m.StartAndSync(ctx, 30*time.Second, &v1alpha1.Widget{}); err != nil {
			t.Fatal(err)
		}
		if got := cachedWidgets(t, m); got != n {
			t.Errorf("MaxObjects %d: right after StartAndSync the cache holds %d Widgets, want %d", max, got, n)
		}
	}
}
