package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// scraped is one series of a Prometheus text exposition.
type scraped struct {
	name   string
	labels map[string]string
	value  float64
}

// exposition is what a /metrics endpoint served: each family's TYPE, and
// its series (for a histogram, its _bucket, _sum and _count lines).
type exposition struct {
	types  map[string]string
	series []scraped
}

var scrapeLabel = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

func parseExposition(r io.Reader) (*exposition, error) {
	e := &exposition{types: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) != 2 {
				return nil, fmt.Errorf("TYPE line %q", line)
			}
			e.types[f[0]] = f[1]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := scraped{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			end := strings.LastIndexByte(line, '}')
			if end < i {
				return nil, fmt.Errorf("series %q", line)
			}
			s.name, rest = line[:i], line[end+1:]
			for _, m := range scrapeLabel.FindAllStringSubmatch(line[i+1:end], -1) {
				s.labels[m[1]] = m[2]
			}
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", line, err)
		}
		s.value = v
		e.series = append(e.series, s)
	}
	return e, sc.Err()
}

// value is the first series name whose labels include the pairs of
// labelValues (label, value, label, value...), and whether there is one.
func (e *exposition) value(name string, labelValues ...string) (float64, bool) {
	for _, s := range e.series {
		if s.name == name && s.has(labelValues) {
			return s.value, true
		}
	}
	return 0, false
}

// has tells whether s has each label of labelValues with its value.
func (s scraped) has(labelValues []string) bool {
	for i := 0; i+1 < len(labelValues); i += 2 {
		if s.labels[labelValues[i]] != labelValues[i+1] {
			return false
		}
	}
	return true
}

// namesLabelled lists the series names with label=value whose name has prefix.
func (e *exposition) namesLabelled(prefix, label, value string) []string {
	var names []string
	for _, s := range e.series {
		if strings.HasPrefix(s.name, prefix) && s.labels[label] == value {
			names = append(names, s.name)
		}
	}
	return names
}

// scrapeMetrics reads the plain HTTP /metrics of a manager (one run with
// --metrics-secure=false) at addr.
func scrapeMetrics(g Gomega, addr string) *exposition {
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	e, err := parseExposition(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return e
}

// scrapeMembers are two members that only the metrics test's manager
// serves, so that everything its metrics count is the test's doing.
var scrapeMembers = &hubtest.LateMembers{Names: []string{"scrape-a", "scrape-b"}}

// scrapeMembersOf starts the scrape members once and returns them.
func scrapeMembersOf(t *testing.T) (a, b *fleet.ControlPlane) {
	t.Helper()
	return scrapeMembers.Get(t, "scrape-a"), scrapeMembers.Get(t, "scrape-b")
}

func TestMetricsEndpointServesTheDocumentedSeries(t *testing.T) {
	const ns = "widgethub-scrape"
	ctx := context.Background()
	dir := t.TempDir()
	bin := buildManager(t)
	a, b := scrapeMembersOf(t)
	g := NewWithT(t)
	g.Expect(fleet.EnsureNamespace(ctx, testFleet.Hub.Client, ns)).To(Succeed())
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(hubKubeconfig, testFleet.Hub.Kubeconfig, 0o600)).To(Succeed())

	proxy, err := fleet.NewProxy(hubtest.HostPort(t, b))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Down)
	registrations := map[string][]byte{
		a.Name: a.Kubeconfig,
		b.Name: hubtest.EditKubeconfig(t, b.Kubeconfig, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "https://" + proxy.Addr() }),
	}
	for name, kc := range registrations {
		secret := registration.NewSecret(ns, name, kc)
		if err := testFleet.Hub.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) { // -count=2
			g.Expect(testFleet.Hub.Client.Update(ctx, secret)).To(Succeed())
		} else {
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, registration.NewSecret(ns, name, nil)) })
	}
	for i := range 3 {
		hubtest.CreateWidget(t, a, "shop", fmt.Sprintf("scraped-%d", i), 1)
	}
	hubtest.CreateWidget(t, b, "shop", "scraped", 1)
	t.Cleanup(func() { deleteWidgetsAndDeployments(t, a, b) })

	addr, err := fleet.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	const probeInterval, threshold = time.Second, 2
	started := time.Now()
	startManagerProcess(t, bin, dir, "scrape", []string{"--kubeconfig=" + hubKubeconfig, "--registration-namespace=" + ns,
		"--leader-elect=false", "--metrics-bind-address=" + addr, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--probe-interval=" + probeInterval.String(), "--probe-timeout=1s", fmt.Sprintf("--probe-failure-threshold=%d", threshold)})
	scrape := func(g Gomega) *exposition { return scrapeMetrics(g, addr) }
	registered := func(g Gomega, e *exposition) float64 {
		v, ok := e.value("widgethub_registrations")
		g.Expect(ok).To(BeTrue(), "widgethub_registrations is served")
		return v
	}
	series := func(g Gomega, e *exposition, name, cluster string) float64 {
		v, ok := e.value(name, "cluster", cluster)
		g.Expect(ok).To(BeTrue(), "%s{cluster=%q} is served", name, cluster)
		return v
	}

	// Both members engaged and answering.
	var e *exposition
	g.Eventually(func(g Gomega) {
		e = scrape(g)
		for _, m := range []string{a.Name, b.Name} {
			g.Expect(series(g, e, "widgethub_member_ready", m)).To(Equal(1.0), "member %s ready", m)
			since := series(g, e, "widgethub_member_engaged_since_seconds", m)
			g.Expect(since).To(BeNumerically(">=", float64(started.Unix())), "member %s engaged since", m)
			g.Expect(since).To(BeNumerically("<=", float64(time.Now().Unix())), "member %s engaged since", m)
			g.Expect(series(g, e, "widgethub_member_probe_duration_seconds_count", m)).To(BeNumerically(">=", 1), "member %s probed", m)
		}
		g.Expect(series(g, e, "widgethub_member_widgets", a.Name)).To(Equal(3.0))
		g.Expect(series(g, e, "widgethub_member_widgets", b.Name)).To(Equal(1.0))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	for _, m := range []string{a.Name, b.Name} {
		// Every probe is timed: the histogram's +Inf bucket holds them all.
		count := series(g, e, "widgethub_member_probe_duration_seconds_count", m)
		inf, ok := e.value("widgethub_member_probe_duration_seconds_bucket", "cluster", m, "le", "+Inf")
		g.Expect(ok).To(BeTrue(), "the +Inf bucket of the probe durations of %s", m)
		g.Expect(inf).To(Equal(count), "probes of %s in the +Inf bucket", m)
		g.Expect(series(g, e, "widgethub_member_probe_duration_seconds_sum", m)).To(BeNumerically(">", 0), "probe time of %s", m)
	}

	// a's Deployment writes hang: one member's bound of its requests is in
	// flight (docs: 24 of the 32 workers), the rest wait in the queue, and
	// the workers a holds count as unresponsive; once the writes pass, its
	// queue drains.
	const held = 30
	bound := documentedPerMemberBound(t, app.DefaultOptions())
	hook := holdDeploymentWritesInForce(t, a, "held")
	g.Expect(fleet.CreateWidgets(ctx, a.Client, "held", "held", held, 4)).To(Succeed())
	g.Eventually(func(g Gomega) {
		e = scrape(g)
		g.Expect(series(g, e, "widgethub_workqueue_member_in_flight", a.Name)).To(Equal(float64(bound)), "a's requests in flight")
		g.Expect(series(g, e, "widgethub_workqueue_member_depth", a.Name)).To(Equal(float64(held-bound)), "a's requests waiting")
		unresponsive, ok := e.value("widgethub_workqueue_unresponsive_in_flight", "name", "widget")
		g.Expect(ok).To(BeTrue(), "widgethub_workqueue_unresponsive_in_flight is served")
		g.Expect(unresponsive).To(Equal(float64(bound)), "workers held by the member that does not answer")
		g.Expect(series(g, e, "widgethub_workqueue_member_in_flight", b.Name)).To(BeZero(), "b's requests in flight")
	}, 20*time.Second, hubtest.Poll).Should(Succeed(), "a's Deployment writes held by the webhook")
	hook.releaseAll()
	g.Eventually(func(g Gomega) {
		e = scrape(g)
		g.Expect(series(g, e, "widgethub_workqueue_member_in_flight", a.Name)).To(BeZero(), "a's requests in flight")
		g.Expect(series(g, e, "widgethub_workqueue_member_depth", a.Name)).To(BeZero(), "a's requests waiting")
		g.Expect(series(g, e, "widgethub_member_widgets", a.Name)).To(Equal(float64(3 + held)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// a's Deployment writes are refused: its reconcile errors are counted, b's are not.
	hubtest.DenyDeploymentWritesInForce(t, a, "refused")
	hubtest.CreateWidget(t, a, "refused", "refused", 1)
	g.Eventually(func(g Gomega) {
		e = scrape(g)
		g.Expect(series(g, e, "widgethub_member_reconcile_errors_total", a.Name)).To(BeNumerically(">=", 1))
		g.Expect(series(g, e, "widgethub_member_widgets", a.Name)).To(Equal(float64(4 + held)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	// Served from 0 since b's caches synced.
	g.Expect(series(g, e, "widgethub_member_reconcile_errors_total", b.Name)).To(BeZero(), "b's reconciles do not fail")
	g.Expect(series(g, e, "widgethub_member_reconciles_total", b.Name)).To(BeNumerically(">=", 1), "b's Widget reconciled")

	// b stops answering: parked after the threshold of failed probes.
	proxy.Down()
	g.Eventually(func(g Gomega) {
		e = scrape(g)
		g.Expect(series(g, e, "widgethub_member_ready", b.Name)).To(Equal(0.0))
		g.Expect(series(g, e, "widgethub_member_engaged_since_seconds", b.Name)).To(Equal(0.0), "b is not engaged")
		failures := series(g, e, "widgethub_member_probe_failures_total", b.Name)
		g.Expect(failures).To(BeNumerically(">=", threshold))
		g.Expect(series(g, e, "widgethub_member_probe_duration_seconds_count", b.Name)).To(BeNumerically(">=", failures), "every probe is timed")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	// a stays engaged (its failing writes may have made it Degraded: not ready).
	g.Expect(series(g, e, "widgethub_member_engaged_since_seconds", a.Name)).To(BeNumerically(">=", float64(started.Unix())), "a is still engaged")

	// docs/metrics.md: names and types.
	types := map[string]string{
		"widgethub_member_ready":                                "gauge",
		"widgethub_member_engaged_since_seconds":                "gauge",
		"widgethub_member_probe_duration_seconds":               "histogram",
		"widgethub_member_probe_failures_total":                 "counter",
		"widgethub_member_widgets":                              "gauge",
		"widgethub_member_reconciles_total":                     "counter",
		"widgethub_member_reconcile_errors_total":               "counter",
		"widgethub_member_events_dropped_total":                 "counter",
		"widgethub_member_credentials_expiring":                 "gauge",
		"widgethub_registrations":                               "gauge",
		"widgethub_workqueue_member_depth":                      "gauge",
		"widgethub_workqueue_member_in_flight":                  "gauge",
		"widgethub_workqueue_depth":                             "gauge",
		"widgethub_workqueue_adds_total":                        "counter",
		"widgethub_workqueue_queue_duration_seconds":            "histogram",
		"widgethub_workqueue_work_duration_seconds":             "histogram",
		"widgethub_workqueue_unfinished_work_seconds":           "gauge",
		"widgethub_workqueue_longest_running_processor_seconds": "gauge",
		"widgethub_workqueue_retries_total":                     "counter",
		"widgethub_workqueue_unresponsive_in_flight":            "gauge",
		"controller_runtime_reconcile_total":                    "counter",
	}
	for name, typ := range types {
		g.Expect(e.types).To(HaveKeyWithValue(name, typ), "# TYPE of %s", name)
		if strings.HasPrefix(name, "widgethub_workqueue_") {
			sample := name
			if typ == "histogram" {
				sample += "_count"
			}
			_, ok := e.value(sample, "name", "widget")
			g.Expect(ok).To(BeTrue(), "%s{name=\"widget\"} is served", sample)
		}
	}
	reconciled, ok := e.value("controller_runtime_reconcile_total", "controller", "widget", "result", "success")
	g.Expect(ok).To(BeTrue(), "controller_runtime_reconcile_total{controller=\"widget\",result=\"success\"}")
	g.Expect(reconciled).To(BeNumerically(">=", 3+held+1), "a's and b's Widgets reconciled")
	// a, engaged, has its share of the queue and its counters from zero;
	// b, parked, has no share; both are registered.
	g.Expect(series(g, e, "widgethub_member_reconciles_total", a.Name)).To(BeNumerically(">=", 4+held), "a's Widgets reconciled")
	g.Expect(series(g, e, "widgethub_member_events_dropped_total", a.Name)).To(BeZero())
	g.Expect(e.namesLabelled("widgethub_workqueue_member_", "cluster", b.Name)).To(BeEmpty(), "queue series of the parked member")
	g.Expect(registered(g, e)).To(Equal(2.0))

	// a unregistered: its series go, b's stay.
	g.Expect(testFleet.Hub.Client.Delete(ctx, registration.NewSecret(ns, a.Name, nil))).To(Succeed())
	g.Eventually(func(g Gomega) {
		e = scrape(g)
		g.Expect(e.namesLabelled("widgethub_member_", "cluster", a.Name)).To(BeEmpty(), "series of the unregistered member")
		g.Expect(e.namesLabelled("widgethub_workqueue_member_", "cluster", a.Name)).To(BeEmpty(), "queue series of the unregistered member")
		g.Expect(registered(g, e)).To(Equal(1.0))
		g.Expect(e.namesLabelled("widgethub_member_", "cluster", b.Name)).NotTo(BeEmpty(), "series of the registered member")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}

// deleteWidgetsAndDeployments deletes every Widget and Deployment of the
// members (envtest runs no garbage collector), so that a test can run again.
func deleteWidgetsAndDeployments(t *testing.T, members ...*fleet.ControlPlane) {
	t.Helper()
	for _, cp := range members {
		namespaces := &corev1.NamespaceList{}
		if err := cp.Client.List(context.Background(), namespaces); err != nil {
			t.Error(err)
			continue
		}
		for _, ns := range namespaces.Items {
			for _, obj := range []client.Object{&v1alpha1.Widget{}, &appsv1.Deployment{}} {
				if err := cp.Client.DeleteAllOf(context.Background(), obj, client.InNamespace(ns.Name)); err != nil {
					t.Error(err)
				}
			}
		}
	}
}
