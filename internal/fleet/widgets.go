package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// WidgetName is the name of the i-th Widget CreateWidgets creates.
func WidgetName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// CreateWidgets creates n Widgets named WidgetName(prefix, 0..n-1) in
// namespace with writers concurrent writers.
func CreateWidgets(ctx context.Context, c client.Client, namespace, prefix string, n, writers int) error {
	if err := EnsureNamespace(ctx, c, namespace); err != nil {
		return err
	}
	return Parallel(n, writers, func(i int) error {
		w := &v1alpha1.Widget{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: WidgetName(prefix, i)},
			Spec:       v1alpha1.WidgetSpec{Replicas: ptr.To[int32](1)},
		}
		if err := c.Create(ctx, w); err != nil {
			return fmt.Errorf("create widget %s/%s: %w", namespace, w.Name, err)
		}
		return nil
	})
}

// Parallel runs do(0..n-1) on writers goroutines and returns the first error.
func Parallel(n, writers int, do func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
