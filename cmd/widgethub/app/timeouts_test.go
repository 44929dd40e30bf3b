package app_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// A reconcile that runs past its deadline (--reconcile-timeout, here 10s) is
// cut short and counted in controller_runtime_reconcile_timeouts_total
// (reconcilers/controller's doc): a manager whose member requests may take
// longer than that (--member-request-timeout) reconciles a Widget of a member
// that holds its Deployment writes unanswered.
func TestReconcilePastItsDeadlineIsCounted(t *testing.T) {
	const ns, widgetNS = "widgethub-timeouts", "timeouts"
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	dir := t.TempDir()
	bin := buildManager(t)
	hubtest.EnsureNamespace(t, testFleet.Hub, ns)
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(hubKubeconfig, testFleet.Hub.Kubeconfig, 0o600)).To(Succeed())

	proxy, err := fleet.NewHTTPProxy(gamma.Config.Host, gamma.Config.CAData)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	secret := registration.NewSecret(ns, "timeouts-gamma", hubtest.FrontKubeconfig(t, proxy, gamma, "widgethub-timeouts"))
	g.Expect(testFleet.Hub.Client.Create(t.Context(), secret)).To(Succeed())
	t.Cleanup(func() { hubtest.UnregisterIn(t, ns, secret.Name) })

	addr, err := fleet.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	const reconcileTimeout, requestTimeout = 10 * time.Second, 30 * time.Second
	startManagerProcess(t, bin, dir, "timeouts", []string{"--kubeconfig=" + hubKubeconfig, "--registration-namespace=" + ns,
		"--leader-elect=false", "--metrics-bind-address=" + addr, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--member-request-timeout=" + requestTimeout.String(), "--reconcile-timeout=" + reconcileTimeout.String()})
	timeouts := func(g Gomega) float64 {
		v, ok := scrapeMetrics(g, addr).value("controller_runtime_reconcile_timeouts_total", "controller", "widget")
		g.Expect(ok).To(BeTrue(), "controller_runtime_reconcile_timeouts_total{controller=\"widget\"} is served")
		return v
	}
	g.Eventually(func(g Gomega) {
		ready, ok := scrapeMetrics(g, addr).value("widgethub_member_ready", "cluster", secret.Name)
		g.Expect(ok && ready == 1).To(BeTrue(), "%s engaged", secret.Name)
		g.Expect(timeouts(g)).To(BeZero())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// Every Deployment write to gamma goes unanswered from now on.
	proxy.Set(fleet.Fault{BlackHole: true, Match: func(r *http.Request) bool {
		return fleet.Writes(r) && strings.Contains(r.URL.Path, "/deployments")
	}})
	t.Cleanup(proxy.Clear)
	created := time.Now()
	hubtest.CreateWidget(t, gamma, widgetNS, "late", 1)
	g.Eventually(func() []string { return proxy.Held() }, hubtest.Within, hubtest.Poll).ShouldNot(BeEmpty(), "the Deployment write held")
	window := reconcileTimeout - time.Since(created) - time.Second
	if window < time.Second {
		t.Fatalf("the write was held %s after the Widget was created: too late to show that nothing times out before %s", time.Since(created).Round(time.Millisecond), reconcileTimeout)
	}
	g.Consistently(timeouts, window, 200*time.Millisecond).Should(BeZero(),
		"a reconcile counted as timed out before its deadline")
	g.Eventually(timeouts, requestTimeout/2, hubtest.Poll).Should(BeNumerically(">=", 1), "the reconcile held past its deadline")
	t.Logf("the reconcile held since %s ago was counted as timed out", time.Since(created).Round(time.Second))
}
