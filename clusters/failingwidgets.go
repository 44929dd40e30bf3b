package clusters

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// failingWidgets is the set of a member's Widgets whose latest reconcile
// failed. A member's error rate counts Widgets, not attempts: one Widget
// retried at its backoff is one failing Widget, and one that has recovered,
// or was deleted (its last reconcile finds nothing and succeeds), leaves the
// set. The set never holds more Widgets than the member's cache does.
type failingWidgets struct {
	mu  sync.Mutex
	set map[types.NamespacedName]struct{}
}

func (f *failingWidgets) record(key types.NamespacedName, failed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !failed {
		delete(f.set, key)
		return
	}
	if f.set == nil {
		f.set = make(map[types.NamespacedName]struct{})
	}
	f.set[key] = struct{}{}
}

func (f *failingWidgets) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.set)
}
