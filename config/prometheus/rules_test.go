package prometheus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"
)

// ruleTests is a rule unit-test file as `promtool test rules` reads it
// (Prometheus's docs/configuration/unit_testing_rules.md), the fields these
// tests use; decoding is strict, so a field this runner does not know fails
// rather than being ignored.
type ruleTests struct {
	RuleFiles          []string        `json:"rule_files"`
	EvaluationInterval model.Duration  `json:"evaluation_interval"`
	Tests              []ruleTestGroup `json:"tests"`
}

type ruleTestGroup struct {
	Name        string         `json:"name"`
	Interval    model.Duration `json:"interval"`
	InputSeries []struct {
		Series string `json:"series"`
		Values string `json:"values"`
	} `json:"input_series"`
	AlertRuleTests []alertTest `json:"alert_rule_test"`
}

type alertTest struct {
	EvalTime  model.Duration `json:"eval_time"`
	Alertname string         `json:"alertname"`
	ExpAlerts []struct {
		ExpLabels      map[string]string `json:"exp_labels"`
		ExpAnnotations map[string]string `json:"exp_annotations"`
	} `json:"exp_alerts"`
}

// healthyFleet names the test group in which every alert must be checked silent.
const healthyFleet = "healthy fleet"

// TestAlertRules runs rules_test.yaml against the PrometheusRule of
// rules.yaml with Prometheus's own rule engine, as `promtool test rules`
// does: the input series loaded by promqltest, the rule groups evaluated
// every evaluation_interval from time 0, and at each eval_time the firing
// alerts compared, labels and expanded annotations, with those expected.
// Every alert must fire in some test and be silent on the healthy fleet.
func TestAlertRules(t *testing.T) {
	var file ruleTests
	data, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatalf("rules_test.yaml: %v", err)
	}
	if len(file.RuleFiles) != 1 {
		t.Fatalf("rules_test.yaml names %d rule files, want rules.yaml", len(file.RuleFiles))
	}
	ruleFile, alerts := ruleGroupsOf(t, file.RuleFiles[0])
	evalInterval := time.Duration(file.EvaluationInterval)
	if evalInterval == 0 {
		evalInterval = time.Minute // promtool's default
	}
	for _, tg := range file.Tests {
		if tg.Interval == 0 {
			tg.Interval = model.Duration(evalInterval)
		}
		t.Run(tg.Name, func(t *testing.T) { runRuleTestGroup(t, tg, evalInterval, ruleFile) })
	}
	expectEveryAlertTested(t, file.Tests, alerts)
}

// ruleGroupsOf writes the rule groups of the PrometheusRule in path (its
// spec, which is a Prometheus rule file) to a file for the rule manager,
// and returns that file and the alerts it defines.
func ruleGroupsOf(t *testing.T, path string) (string, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := yaml.Unmarshal(data, &raw); err != nil || rule.Kind != "PrometheusRule" {
		t.Fatalf("%s: not a PrometheusRule (%v)", path, err)
	}
	spec, err := yaml.Marshal(raw["spec"])
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(out, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	return out, alerts
}

// runRuleTestGroup loads tg's input series, evaluates the rule groups of
// ruleFile every evalInterval up to tg's last eval_time, and checks the
// alerts firing at each eval_time against those expected: at an eval_time
// between two evaluations, those of the evaluation before it.
func runRuleTestGroup(t *testing.T, tg ruleTestGroup, evalInterval time.Duration, ruleFile string) {
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", tg.Interval)
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	// The options promtool test rules runs with.
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		t.Fatalf("input_series: %v", err)
	}
	t.Cleanup(func() { _ = suite.Close() })
	suite.SubqueryInterval = evalInterval
	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		Appendable: suite.Storage(),
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     promslog.NewNopLogger(),
	})
	groups, errs := manager.LoadGroups(time.Duration(tg.Interval), labels.EmptyLabels(), "", nil, false, ruleFile)
	if len(errs) > 0 {
		t.Fatalf("load %s: %v", ruleFile, errs)
	}
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // no earlier run's state to restore
			}
		}
	}

	checks := slices.Clone(tg.AlertRuleTests)
	sort.SliceStable(checks, func(i, j int) bool { return checks[i].EvalTime < checks[j].EvalTime })
	start := time.Unix(0, 0).UTC()
	for ts := start; len(checks) > 0; ts = ts.Add(evalInterval) {
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatalf("input_series at %s: %v", ts.Sub(start), err)
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						t.Fatalf("rule %s at %s: %v", r.Name(), ts.Sub(start), r.LastError())
					}
				}
			}
		})
		for len(checks) > 0 && time.Duration(checks[0].EvalTime) < ts.Sub(start)+evalInterval {
			expectFiring(t, checks[0], firing(groups, checks[0].Alertname))
			checks = checks[1:]
		}
	}
}

// firingAlert is an alert's labels and annotations, as text for comparison.
type firingAlert struct{ labels, annotations string }

// firing returns the alerts of the rules named alertname that fire now, sorted.
func firing(groups map[string]*rules.Group, alertname string) []firingAlert {
	var out []firingAlert
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || ar.Name() != alertname {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					out = append(out, firingAlert{a.Labels.String(), a.Annotations.String()})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b firingAlert) int { return strings.Compare(a.labels+a.annotations, b.labels+b.annotations) })
	return out
}

// expectFiring compares the alerts firing (got) with those check expects:
// its exp_labels with the alertname added, and exactly its exp_annotations.
func expectFiring(t *testing.T, check alertTest, got []firingAlert) {
	t.Helper()
	var want []firingAlert
	for _, a := range check.ExpAlerts {
		lbls := labels.FromMap(a.ExpLabels)
		lbls = labels.NewBuilder(lbls).Set(labels.AlertName, check.Alertname).Labels()
		want = append(want, firingAlert{lbls.String(), labels.FromMap(a.ExpAnnotations).String()})
	}
	slices.SortFunc(want, func(a, b firingAlert) int { return strings.Compare(a.labels+a.annotations, b.labels+b.annotations) })
	if !slices.Equal(got, want) {
		t.Errorf("%s at %s:\n  firing:   %s\n  expected: %s", check.Alertname, check.EvalTime, describe(got), describe(want))
	}
}

func describe(alerts []firingAlert) string {
	if len(alerts) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, a := range alerts {
		fmt.Fprintf(&b, "\n    labels %s\n    annotations %s", a.labels, a.annotations)
	}
	return b.String()
}

// expectEveryAlertTested fails t unless each of alerts is expected to fire
// in some test group and checked silent in the healthy fleet's.
func expectEveryAlertTested(t *testing.T, groups []ruleTestGroup, alerts []string) {
	t.Helper()
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tg := range groups {
		for _, check := range tg.AlertRuleTests {
			if len(check.ExpAlerts) > 0 {
				fires[check.Alertname] = true
			} else if tg.Name == healthyFleet {
				silent[check.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s is never expected to fire in rules_test.yaml", a)
		}
		if !silent[a] {
			t.Errorf("alert %s is not checked silent in rules_test.yaml's %q", a, healthyFleet)
		}
	}
}
