package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/widgethub/widgethub/internal/hubtest"
	"k8s.io/apimachinery/pkg/types"
)

// logLine is one line of the manager's log (zap's development encoding:
// time, level, logger, message, then the fields as JSON).
type logLine struct {
	message string
	fields  map[string]any
}

// parseLog returns the lines of log that carry fields.
func parseLog(log string) []logLine {
	var lines []logLine
	for line := range strings.Lines(log) {
		parts := strings.Split(strings.TrimRight(line, "\n"), "\t")
		last := parts[len(parts)-1]
		if len(parts) < 3 || !strings.HasPrefix(last, "{") {
			continue
		}
		fields := map[string]any{}
		if json.Unmarshal([]byte(last), &fields) != nil {
			continue
		}
		lines = append(lines, logLine{message: parts[len(parts)-2], fields: fields})
	}
	return lines
}

// Every line the Widget controller logs in a reconcile carries the
// request's cluster, namespace and name (STYLE.md; multicluster-runtime's
// logger would not add the cluster): those of the reconciler (Created
// Deployment) and controller-runtime's (Reconciler error) alike.
func TestReconcileLogLinesNameTheirRequest(t *testing.T) {
	beta := testFleet.Member("beta")
	hubtest.RegisterEngaged(t, "beta", beta)
	from := len(hubtest.Logs.String())
	created := hubtest.CreateShopWidget(t, beta, "logged", 1)
	const refusedNS = "logged-refused"
	hubtest.DenyDeploymentWritesInForce(t, beta, refusedNS)
	hubtest.CreateWidget(t, beta, refusedNS, "refused", 1)
	refused := types.NamespacedName{Namespace: refusedNS, Name: "refused"}

	// want are the lines that must be there, each with its request's fields.
	want := map[string]types.NamespacedName{"Created Deployment": created, "Reconciler error": refused}
	var reconcileLines []logLine
	NewWithT(t).Eventually(func(g Gomega) {
		reconcileLines = nil
		seen := map[string]bool{}
		for _, l := range parseLog(hubtest.Logs.String()[from:]) {
			if l.fields["controller"] != "widget" || l.fields["reconcileID"] == nil {
				continue
			}
			reconcileLines = append(reconcileLines, l)
			if key, ok := want[l.message]; ok && l.fields["cluster"] == "beta" && l.fields["namespace"] == key.Namespace && l.fields["name"] == key.Name {
				seen[l.message] = true
			}
		}
		g.Expect(seen).To(HaveLen(len(want)), "log lines with their request's cluster, namespace and name")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	for _, l := range reconcileLines {
		for _, field := range []string{"cluster", "namespace", "name"} {
			if v, _ := l.fields[field].(string); v == "" {
				t.Errorf("reconcile log line %q has no %s: %v", l.message, field, l.fields)
			}
		}
	}
	t.Logf("%d reconcile log lines, each with its cluster, namespace and name", len(reconcileLines))
}
