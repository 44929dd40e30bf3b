package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// table asks cp's API server for path as the Table that kubectl get prints,
// and returns the names of its columns (wide ones with wide) and, by object
// name, the cells of each row.
func table(g Gomega, cp *fleet.ControlPlane, path string, wide bool) ([]string, map[string][]any) {
	httpClient, err := rest.HTTPClientFor(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	u, err := url.Parse(cp.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	u.Path = path
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u.String(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
	t := &metav1.Table{}
	g.Expect(json.Unmarshal(body, t)).To(Succeed())
	var columns []string
	shown := map[int]bool{}
	for i, c := range t.ColumnDefinitions {
		if c.Priority == 0 || wide {
			columns = append(columns, c.Name)
			shown[i] = true
		}
	}
	rows := map[string][]any{}
	for _, r := range t.Rows {
		var cells []any
		for i, cell := range r.Cells {
			if shown[i] {
				cells = append(cells, cell)
			}
		}
		rows[fmt.Sprint(r.Cells[0])] = cells
	}
	return columns, rows
}

// kubectl get widgets shows Replicas, Available, Ready and Age, as the hub
// reports them; kubectl get memberclusters shows Ready, Reason, Version,
// Widgets and Age (and Served-By with -o wide).
func TestGetShowsThePrinterColumns(t *testing.T) {
	g := NewWithT(t)
	alpha := testFleet.Member("alpha")
	hubtest.RegisterEngaged(t, "alpha", alpha)
	key := hubtest.CreateShopWidget(t, alpha, "columns", 3)
	hubtest.ExpectWidgetStatus(t, alpha, key, 0, metav1.ConditionFalse, v1alpha1.WidgetProgressingReason, "")
	hubtest.SetAvailable(t, alpha, key, 2)
	hubtest.ExpectWidgetStatus(t, alpha, key, 2, metav1.ConditionFalse, "", "2/3 replicas available")

	widgets := "/apis/widgethub.io/v1alpha1/namespaces/shop/widgets"
	g.Eventually(func(g Gomega) {
		columns, rows := table(g, alpha, widgets, false)
		g.Expect(columns).To(Equal([]string{"Name", "Replicas", "Available", "Ready", "Age"}))
		g.Expect(rows).To(HaveKey("columns"))
		g.Expect(rows["columns"][:4]).To(Equal([]any{"columns", float64(3), float64(2), "False"}))
		g.Expect(rows["columns"][4]).To(MatchRegexp(`^[0-9]+s$`), "Age")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	hubtest.SetAvailable(t, alpha, key, 3)
	hubtest.ExpectWidgetStatus(t, alpha, key, 3, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, "")
	columns, rows := table(g, alpha, widgets, false)
	g.Expect(columns).To(HaveLen(5))
	g.Expect(rows["columns"][1:4]).To(Equal([]any{float64(3), float64(3), "True"}))

	members := "/apis/widgethub.io/v1alpha1/namespaces/" + hubNS + "/memberclusters"
	g.Eventually(func(g Gomega) {
		columns, rows := table(g, testFleet.Hub, members, true)
		g.Expect(columns).To(Equal([]string{"Name", "Ready", "Reason", "Version", "Widgets", "Served-By", "Age"}))
		mc := hubtest.MemberCluster(g, "alpha")
		g.Expect(rows["alpha"][:6]).To(Equal([]any{"alpha", "True", v1alpha1.MemberEngagedReason, "v1.36.3", float64(mc.Status.Widgets), nil}),
			"alpha, served without sharding: Served-By empty")
		g.Expect(mc.Status.Widgets).To(BeNumerically(">=", 1))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	columns, _ = table(g, testFleet.Hub, members, false)
	g.Expect(columns).To(Equal([]string{"Name", "Ready", "Reason", "Version", "Widgets", "Age"}))
}
