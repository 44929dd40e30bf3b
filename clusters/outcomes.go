package clusters

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// maxJudgedWidgets bounds the Widgets a member remembers between two
// judgments of its error rate: ten already decide it, more only refine it.
const maxJudgedWidgets = 1000

// widgetOutcomes remembers, for each Widget reconciled since the last reset,
// whether its latest reconcile failed. A member's error rate counts Widgets,
// not attempts: one Widget retried at its backoff is one failing Widget,
// and one that has recovered no longer counts as failing.
type widgetOutcomes struct {
	mu     sync.Mutex
	failed map[types.NamespacedName]bool
}

func (o *widgetOutcomes) record(key types.NamespacedName, failed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed == nil {
		o.failed = make(map[types.NamespacedName]bool)
	}
	if _, seen := o.failed[key]; seen || len(o.failed) < maxJudgedWidgets {
		o.failed[key] = failed
	}
}

// take returns the counts and starts anew when at least atLeast Widgets
// were reconciled; with fewer it keeps them and returns ok false. One lock
// for both, so no outcome recorded between counting and resetting is lost.
func (o *widgetOutcomes) take(atLeast int) (widgets, failing int, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.failed) < atLeast {
		return 0, 0, false
	}
	for _, failed := range o.failed {
		if failed {
			failing++
		}
	}
	widgets, o.failed = len(o.failed), nil
	return widgets, failing, true
}
