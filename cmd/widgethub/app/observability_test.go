package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/internal/manifests"
)

// The observability pack: config/prometheus (ServiceMonitor, PrometheusRule)
// and config/grafana (the dashboard), as kustomize renders them.
const repoRoot = "../../.."

// kustomize renders config/<dir> with kubectl's kustomize.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("kubectl", "kustomize", filepath.Join(repoRoot, "config", dir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, stderr.String())
	}
	objs, err := manifests.Decode(out)
	if err != nil {
		t.Fatalf("config/%s: %v", dir, err)
	}
	return objs
}

// decodeStrictly decodes obj into into, refusing fields into does not have.
func decodeStrictly(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s %s does not decode into %T: %v", obj.GetKind(), obj.GetName(), into, err)
	}
}

// monitoringObjects returns the ServiceMonitor and PrometheusRule of
// config/prometheus, decoded strictly into prometheus-operator's types.
func monitoringObjects(t *testing.T) (*monitoringv1.ServiceMonitor, *monitoringv1.PrometheusRule) {
	t.Helper()
	var sm *monitoringv1.ServiceMonitor
	var rule *monitoringv1.PrometheusRule
	for _, obj := range kustomize(t, "prometheus") {
		if obj.GetAPIVersion() != monitoringv1.SchemeGroupVersion.String() {
			t.Fatalf("%s %s: apiVersion %s", obj.GetKind(), obj.GetName(), obj.GetAPIVersion())
		}
		switch obj.GetKind() {
		case monitoringv1.ServiceMonitorsKind:
			sm = &monitoringv1.ServiceMonitor{}
			decodeStrictly(t, obj, sm)
		case monitoringv1.PrometheusRuleKind:
			rule = &monitoringv1.PrometheusRule{}
			decodeStrictly(t, obj, rule)
		default:
			t.Fatalf("config/prometheus holds a %s", obj.GetKind())
		}
	}
	if sm == nil || rule == nil {
		t.Fatal("config/prometheus must hold a ServiceMonitor and a PrometheusRule")
	}
	return sm, rule
}

// dashboardPanel is what the tests read of a Grafana panel.
type dashboardPanel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // of a collapsed row
}

// dashboard is what the tests read of the Grafana dashboard.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

const dashboardFile = "config/grafana/widgethub-dashboard.json"

func readDashboard(t *testing.T) (*dashboard, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{}
	if err := json.Unmarshal(data, d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, data
}

var grafanaVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// dashboardQueries returns the PromQL of every panel, by panel title, with
// the dashboard's variables replaced by their "All" value as Grafana sends
// them; a variable the dashboard does not define fails the test.
func dashboardQueries(t *testing.T, d *dashboard) map[string][]string {
	t.Helper()
	all := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			all[v.Name] = v.AllValue
		}
	}
	queries := map[string][]string{}
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			if p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %q, want the dashboard's ${datasource}", p.Title, p.Datasource.UID)
			}
			for _, target := range p.Targets {
				expr := grafanaVariable.ReplaceAllStringFunc(target.Expr, func(m string) string {
					name := grafanaVariable.FindStringSubmatch(m)[1]
					v, ok := all[name]
					if !ok {
						t.Errorf("panel %q uses $%s, which the dashboard does not define", p.Title, name)
					}
					return v
				})
				queries[p.Title] = append(queries[p.Title], expr)
			}
		}
	}
	walk(d.Panels)
	return queries
}

// observabilityQueries is every PromQL expression of the rules and the
// dashboard, by where it is.
func observabilityQueries(t *testing.T) map[string]string {
	t.Helper()
	_, rule := monitoringObjects(t)
	d, _ := readDashboard(t)
	exprs := map[string]string{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr.String()
		}
	}
	for title, qs := range dashboardQueries(t, d) {
		for i, q := range qs {
			exprs[fmt.Sprintf("panel %q query %d", title, i+1)] = q
		}
	}
	return exprs
}

// promql is Prometheus's parser with its default options: no experimental
// functions or syntax, which a Prometheus does not accept unless told to.
var promql = parser.NewParser(parser.Options{})

// metricNames lists the metric names expr selects.
func metricNames(expr parser.Expr) []string {
	var names []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" { // {__name__="..."}
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names
}

func TestObservabilityQueriesParse(t *testing.T) {
	exprs := observabilityQueries(t)
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions found in the rules and the dashboard", len(exprs))
	}
	for where, q := range exprs {
		expr, err := promql.ParseExpr(q)
		if err != nil {
			t.Errorf("%s does not parse: %v\n%s", where, err, q)
			continue
		}
		if expr.Type() != parser.ValueTypeVector && expr.Type() != parser.ValueTypeScalar {
			t.Errorf("%s is a %s, not a vector", where, expr.Type())
		}
		for _, name := range metricNames(expr) {
			if !strings.HasPrefix(name, "widgethub_") && !strings.HasPrefix(name, "controller_runtime_") && name != "leader_election_master_status" {
				t.Errorf("%s selects %q, neither widgethub's nor controller-runtime's", where, name)
			}
		}
	}
}

func TestAlertRulesAreComplete(t *testing.T) {
	_, rule := monitoringObjects(t)
	runbook, err := os.ReadFile(filepath.Join(repoRoot, "docs/observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"WidgethubMemberNotReady", "WidgethubMemberCredentialsExpiring", "WidgethubMemberReconcileErrors", "WidgethubQueueBacklogGrowing",
		"WidgethubNoServingReplica", "WidgethubMembersNotServed"}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name (recording rules belong elsewhere)", g.Name)
				continue
			}
			alerts = append(alerts, r.Alert)
			if r.For == nil || *r.For == "" {
				t.Errorf("%s fires without a for: duration", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, key := range []string{"summary", "description", "runbook_url"} {
				text := r.Annotations[key]
				if strings.TrimSpace(text) == "" {
					t.Errorf("%s has no %s", r.Alert, key)
					continue
				}
				// Prometheus expands annotations as Go templates, with
				// these variables defined first (rules/alerting.go).
				defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
				if _, err := template.New(key).Option("missingkey=zero").Parse(defs + text); err != nil {
					t.Errorf("%s: %s is not a template: %v", r.Alert, key, err)
				}
			}
			anchor := "#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "docs/observability.md"+anchor) {
				t.Errorf("%s: runbook_url %q, want docs/observability.md%s", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			if !bytes.Contains(runbook, []byte("\n### "+r.Alert+"\n")) {
				t.Errorf("docs/observability.md has no section ### %s", r.Alert)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(alerts)
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}

func TestServiceMonitorScrapesTheMetricsService(t *testing.T) {
	sm, _ := monitoringObjects(t)
	data, err := os.ReadFile(filepath.Join(repoRoot, "config/manager/metrics_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("config/manager/metrics_service.yaml: %d objects, %v", len(objs), err)
	}
	svc := &corev1.Service{}
	decodeStrictly(t, objs[0], svc)

	selector := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels)
	if len(sm.Spec.Selector.MatchExpressions) > 0 || !selector.Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor's selector %v does not select Service %s (labels %v)", sm.Spec.Selector, svc.Name, svc.Labels)
	}
	if sm.Namespace != svc.Namespace {
		t.Errorf("ServiceMonitor in %q, Service in %q", sm.Namespace, svc.Namespace)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
		t.Errorf("endpoint port %q is not a port of Service %s", ep.Port, svc.Name)
	}
	if ep.Port != "https" || ep.Scheme == nil || *ep.Scheme != "https" || ep.Path != "/metrics" {
		t.Errorf("endpoint port %q scheme %v path %q, want https, https, /metrics", ep.Port, ep.Scheme, ep.Path)
	}
	if ep.BearerTokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" { //nolint:staticcheck // kubebuilder v4's choice
		t.Errorf("bearerTokenFile %q, want Prometheus's ServiceAccount token", ep.BearerTokenFile) //nolint:staticcheck
	}
	if ep.TLSConfig == nil || ep.TLSConfig.InsecureSkipVerify == nil || !*ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("tlsConfig %+v, want insecureSkipVerify as kubebuilder v4 (the manager's certificate is self-signed)", ep.TLSConfig)
	}
}

func TestGrafanaDashboardConfigMap(t *testing.T) {
	d, data := readDashboard(t)
	if d.UID != "widgethub" {
		t.Errorf("dashboard uid %q", d.UID)
	}
	objs := kustomize(t, "grafana")
	if len(objs) != 1 || objs[0].GetKind() != "ConfigMap" {
		t.Fatalf("config/grafana renders %d objects, want its ConfigMap", len(objs))
	}
	cm := &corev1.ConfigMap{}
	decodeStrictly(t, objs[0], cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap labels %v: Grafana's sidecar loads those labelled grafana_dashboard=1", cm.Labels)
	}
	if cm.Data[filepath.Base(dashboardFile)] != string(data) {
		t.Errorf("the ConfigMap does not hold %s as it is", dashboardFile)
	}
}

// Every metric the rules and the dashboard select is served by a manager
// with an engaged member: a sharded one (the installed default) and one
// elected leader (without --sharding), scraped together.
func TestObservabilityMetricsAreServed(t *testing.T) {
	want := map[string][]string{}
	for where, q := range observabilityQueries(t) {
		expr, err := promql.ParseExpr(q)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for _, name := range metricNames(expr) {
			want[name] = append(want[name], where)
		}
	}
	if len(want) == 0 {
		t.Fatal("the rules and the dashboard select no metric: the test shows nothing")
	}

	ctx := context.Background()
	dir := t.TempDir()
	bin := buildManager(t)
	a, b := scrapeMembersOf(t)
	g := NewWithT(t)
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(hubKubeconfig, testFleet.Hub.Kubeconfig, 0o600)).To(Succeed())

	type manager struct {
		ns, addr string
		member   *fleet.ControlPlane
		args     []string
	}
	managers := []*manager{
		{ns: "widgethub-obs-sharded", member: a, args: []string{"--sharding", "--replica-id=obs-0"}},
		{ns: "widgethub-obs-leader", member: b, args: []string{"--leader-elect=true"}},
	}
	for _, m := range managers {
		g.Expect(fleet.EnsureNamespace(ctx, testFleet.Hub.Client, m.ns)).To(Succeed())
		secret := registration.NewSecret(m.ns, m.member.Name, m.member.Kubeconfig)
		if err := testFleet.Hub.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) { // -count=2
			g.Expect(testFleet.Hub.Client.Update(ctx, secret)).To(Succeed())
		} else {
			g.Expect(err).NotTo(HaveOccurred())
		}
		addr, err := fleet.FreeAddr()
		g.Expect(err).NotTo(HaveOccurred())
		m.addr = addr
		startManagerProcess(t, bin, dir, m.ns, append([]string{"--kubeconfig=" + hubKubeconfig, "--registration-namespace=" + m.ns,
			"--metrics-bind-address=" + addr, "--metrics-secure=false", "--health-probe-bind-address=0", "--probe-interval=1s"}, m.args...))
		t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, registration.NewSecret(m.ns, m.member.Name, nil)) })
	}

	g.Eventually(func(g Gomega) {
		served := map[string]bool{}
		for _, m := range managers {
			e := scrapeMetrics(g, m.addr)
			ready, ok := e.value("widgethub_member_ready", "cluster", m.member.Name)
			g.Expect(ok && ready == 1).To(BeTrue(), "member %s engaged and Ready through %s", m.member.Name, m.ns)
			// Each serves its own kind of replica signal.
			if m.args[0] == "--sharding" {
				owned, ok := e.value("widgethub_members_owned", "replica", "obs-0")
				g.Expect(ok && owned == 1).To(BeTrue(), "widgethub_members_owned{replica=obs-0} is 1")
			} else {
				leading, ok := e.value("leader_election_master_status", "name", app.LeaderElectionID)
				g.Expect(ok && leading == 1).To(BeTrue(), "leader_election_master_status{name=%q} is 1", app.LeaderElectionID)
			}
			for _, s := range e.series {
				served[s.name] = true
			}
		}
		var missing []string
		for _, name := range slices.Sorted(maps.Keys(want)) {
			if !served[name] {
				missing = append(missing, fmt.Sprintf("%s (in %s)", name, strings.Join(want[name], ", ")))
			}
		}
		g.Expect(missing).To(BeEmpty(), "metrics the rules or the dashboard use that no manager serves")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	t.Logf("%d metric names of the rules and the dashboard served by a sharded and a leader-elected manager: %s",
		len(want), strings.Join(slices.Sorted(maps.Keys(want)), " "))
}
