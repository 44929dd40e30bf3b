package widget_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/reconcilers/widget"
)

// heapObjects is how many Widgets and Deployments the heap benchmark
// creates (WIDGETHUB_HEAP_OBJECTS overrides it).
const heapObjects = 200

func heapObjectsOf(*testing.B) int {
	if v, err := strconv.Atoi(os.Getenv("WIDGETHUB_HEAP_OBJECTS")); err == nil && v > 0 {
		return v
	}
	return heapObjects
}

// heavyManagers is how many managers besides the first writer each object has.
const heavyManagers = 8

// BenchmarkMemberCacheHeap measures the hub's heap per cached Widget and per
// cached Deployment, held whole and trimmed by widget.CacheTransform. The
// member (a real API server) holds N of each, written as a member's users
// may: a 100 KiB annotation (kubectl's last-applied configuration, say) and
// heavyManagers more field managers that each set a label. The heap is read
// after GC with a member's cache synced on the namespace of the N objects,
// and on an empty one; the difference over N is the cost per object.
//
//	KUBEBUILDER_ASSETS=$(hack/control-plane.sh) go test -run '^$' -bench MemberCacheHeap -benchtime 1x ./reconcilers/widget/
func BenchmarkMemberCacheHeap(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("needs a control plane: KUBEBUILDER_ASSETS=$(hack/control-plane.sh)")
	}
	n := heapObjectsOf(b)
	ctrllog.SetLogger(logr.Discard())
	f, err := fleet.Start(fleet.Options{Members: []string{"heavy"}, Scheme: clusters.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := f.Stop(); err != nil {
			b.Error(err)
		}
	}()
	cp := f.Member("heavy")
	ctx := context.Background()
	for _, ns := range []string{"heavy", "empty"} {
		if err := fleet.EnsureNamespace(ctx, cp.Client, ns); err != nil {
			b.Fatal(err)
		}
	}
	if err := writeHeavyObjects(ctx, cp.Client, "heavy", n); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		transform toolscache.TransformFunc
	}{{"whole", nil}, {"trimmed", widget.CacheTransform}} {
		b.Run(c.name, func(b *testing.B) {
			for _, obj := range []client.Object{&v1alpha1.Widget{}, &appsv1.Deployment{}} {
				var perObject float64
				for range b.N {
					full := cachedHeap(b, cp, obj, "heavy", c.transform)
					empty := cachedHeap(b, cp, obj, "empty", c.transform)
					perObject = float64(full-empty) / float64(n)
					b.Logf("%T: %d B more heap with %d cached, %d B more with none", obj, full, n, empty)
				}
				b.ReportMetric(perObject, "B/"+reflect.TypeOf(obj).Elem().Name())
			}
		})
	}
}

// cachedHeap is how much more heap is in use, after GC, while a member's
// cache holds the objects of obj's kind in namespace ns.
func cachedHeap(b *testing.B, cp *fleet.ControlPlane, obj client.Object, ns string, transform toolscache.TransformFunc) int64 {
	b.Helper()
	before := heapAfterGC()
	cfg, err := connect.RESTConfig(cp.Kubeconfig, connect.ConfigOptions{})
	if err != nil {
		b.Fatal(err)
	}
	member, err := clusters.New("heavy", cfg, clusters.MemberOptions{Scheme: clusters.NewScheme(), Logger: logr.Discard(),
		Transform:     transform,
		CacheByObject: map[client.Object]cache.ByObject{obj: {Namespaces: map[string]cache.Config{ns: {}}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer member.Stop()
	if err := member.StartAndSync(context.Background(), time.Minute, obj); err != nil {
		b.Fatal(err)
	}
	want := 0
	if ns == "heavy" {
		want = heapObjectsOf(b)
	}
	if got := cachedCount(b, member, obj); got != want {
		b.Fatalf("the cache holds %d objects of %T, want %d", got, obj, want)
	}
	after := heapAfterGC()
	runtime.KeepAlive(member)
	return after - before
}

func cachedCount(b *testing.B, member *clusters.Member, obj client.Object) int {
	var l client.ObjectList = &v1alpha1.WidgetList{}
	if _, ok := obj.(*appsv1.Deployment); ok {
		l = &appsv1.DeploymentList{}
	}
	if err := member.GetClient().List(context.Background(), l, client.UnsafeDisableDeepCopy); err != nil {
		b.Fatal(err)
	}
	return meta.LenList(l)
}

func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// writeHeavyObjects writes n Widgets and n Deployments into ns, each with a
// 100 KiB annotation and heavyManagers more managers.
func writeHeavyObjects(ctx context.Context, c client.Client, ns string, n int) error {
	big := strings.Repeat("x", 100<<10)
	return fleet.Parallel(n, 8, func(i int) error {
		name := fmt.Sprintf("heavy-%05d", i)
		w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": name + big}}}
		if err := c.Create(ctx, w, client.FieldOwner("kubectl")); err != nil {
			return fmt.Errorf("create Widget %s: %w", name, err)
		}
		labels := map[string]string{"app.kubernetes.io/name": "widget", "app.kubernetes.io/instance": name}
		d := appsv1ac.Deployment(name, ns).
			WithLabels(map[string]string{"app.kubernetes.io/managed-by": "widgethub"}).
			WithAnnotations(map[string]string{"note": name + big}).
			WithSpec(appsv1ac.DeploymentSpec().WithReplicas(1).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
				WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).
					WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("widget").WithImage("pause")))))
		if err := c.Apply(ctx, d, client.FieldOwner(widget.FieldManager)); err != nil {
			return fmt.Errorf("apply Deployment %s: %w", name, err)
		}
		for m := range heavyManagers {
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"example.com/m%d":"yes"}}}`, m))
			owner := client.FieldOwner(fmt.Sprintf("m%d", m))
			for _, obj := range []client.Object{&v1alpha1.Widget{}, &appsv1.Deployment{}} {
				obj.SetNamespace(ns)
				obj.SetName(name)
				if err := c.Patch(ctx, obj, patch, owner); err != nil {
					return fmt.Errorf("patch %T %s as m%d: %w", obj, name, m, err)
				}
			}
		}
		return nil
	})
}
