package clusters

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// Past the bound, the object that passed it is still handed on, and every
// later one is refused with its content dropped: the reflector logs it.
func TestObjectBoundRefusesWhatArrivesAfterItStopped(t *testing.T) {
	stops := 0
	b := &objectBound{max: 1, stop: func() { stops++ }}
	b.reset()
	transform := b.transform(nil)
	widget := func(name string) *v1alpha1.Widget {
		return &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"team": "a"}},
			Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](3)}}
	}
	for _, name := range []string{"first", "passes-the-bound"} {
		if out, err := transform(widget(name)); err != nil || out.(*v1alpha1.Widget).Name != name {
			t.Fatalf("%s: transform = %v, %v; want it handed on", name, out, err)
		}
	}
	if stops != 1 {
		t.Fatalf("caches stopped %d times past the bound, want 1", stops)
	}
	late := widget("late")
	out, err := transform(late)
	if out != nil || !errors.Is(err, ErrTooManyObjects) {
		t.Fatalf("an object after the stop: transform = %v, %v; want it refused with ErrTooManyObjects", out, err)
	}
	if late.Name != "late" || late.Namespace != "shop" || late.Labels != nil || late.Spec.Replicas != nil {
		t.Errorf("the refused object keeps more than its namespace and name: %+v", late)
	}
}
