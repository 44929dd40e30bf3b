package sharding

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MembersOwned is how many members the replica serves (engaged, parked or
// being engaged).
var MembersOwned = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "widgethub_members_owned",
	Help: "Members this hub replica serves (engaged, parked until they answer, or being engaged), when the hub is sharded."}, []string{"replica"})

func init() {
	metrics.Registry.MustRegister(MembersOwned)
}
