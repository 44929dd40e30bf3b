package clusters

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrTooManyObjects is wrapped when a member's caches would hold more
// objects than MemberOptions.MaxObjects: the member stopped its caches.
var ErrTooManyObjects = errors.New("the member's caches would hold too many objects")

// objectBound counts the objects of a member's caches, by kind, namespace
// and name as the caches key them, and stops the caches once there are more
// than max. Objects are counted as they arrive (the transform sees each one
// before the cache stores it, also during the initial list when it is
// streamed), so that a member whose watch streams new objects without end
// holds the hub to about max objects; they are forgotten on their delete
// event. A count of zero max counts nothing.
type objectBound struct {
	max int
	// stop stops the member's caches; it must not block.
	stop func()

	mu   sync.Mutex
	keys map[objectKey]types.UID
	err  error
}

type objectKey struct {
	kind            reflect.Type
	namespace, name string
}

func keyOf(obj client.Object) objectKey {
	return objectKey{kind: reflect.TypeOf(obj), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// reset forgets every object and any excess, for caches that start afresh.
func (b *objectBound) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys, b.err = map[objectKey]types.UID{}, nil
}

// exceeded is the error once the bound was passed, else nil.
func (b *objectBound) exceeded() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// transform wraps next (nil: none) so that every object it returns is
// counted. Once the bound was passed, every object that arrives is refused:
// the reflector may still hand the caches a few events it had read when they
// stopped (it picks at random between them and the stop), and only the one
// that passed the bound may land after the stop. The reflector logs a
// refused object, so its content is dropped first.
func (b *objectBound) transform(next toolscache.TransformFunc) toolscache.TransformFunc {
	if b.max <= 0 {
		return next
	}
	return func(in any) (any, error) {
		if err := b.exceeded(); err != nil {
			emptyObject(in)
			return nil, err
		}
		out := in
		if next != nil {
			var err error
			if out, err = next(in); err != nil {
				return nil, err
			}
		}
		if obj, ok := out.(client.Object); ok {
			b.add(obj)
		}
		return out, nil
	}
}

// emptyObject drops all but the kind, namespace and name of in, a decoded
// object no cache holds.
func emptyObject(in any) {
	obj, ok := in.(client.Object)
	if !ok {
		return
	}
	namespace, name := obj.GetNamespace(), obj.GetName()
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	obj.SetNamespace(namespace)
	obj.SetName(name)
}

// byObject is opts with each kind's transform counted too.
func (b *objectBound) byObject(opts map[client.Object]cache.ByObject) map[client.Object]cache.ByObject {
	if b.max <= 0 || opts == nil {
		return opts
	}
	wrapped := make(map[client.Object]cache.ByObject, len(opts))
	for obj, o := range opts {
		if o.Transform != nil {
			o.Transform = b.transform(o.Transform)
		}
		wrapped[obj] = o
	}
	return wrapped
}

func (b *objectBound) add(obj client.Object) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return
	}
	b.keys[keyOf(obj)] = obj.GetUID()
	if len(b.keys) <= b.max {
		b.mu.Unlock()
		return
	}
	b.err = fmt.Errorf("%w: more than %d", ErrTooManyObjects, b.max)
	b.keys = nil // released with the caches
	b.mu.Unlock()
	b.stop()
}

// forget is the delete handler: it forgets obj unless another object of the
// same name arrived since.
func (b *objectBound) forget(deleted any) {
	if tomb, ok := deleted.(toolscache.DeletedFinalStateUnknown); ok {
		deleted = tomb.Obj
	}
	obj, ok := deleted.(client.Object)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := keyOf(obj)
	if uid, ok := b.keys[key]; ok && uid == obj.GetUID() {
		delete(b.keys, key)
	}
}

// syncInformer gets the cache's informer of obj's kind, with the bound's
// delete handler, and waits until it has synced or ctx ends. It waits
// itself: GetInformer does not wait when called before the cache (started
// in a goroutine by StartAndSync) has marked itself started.
func (m *Member) syncInformer(ctx context.Context, obj client.Object) error {
	inf, err := m.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if m.objects.max > 0 {
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: m.objects.forget}); err != nil {
			return err
		}
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("wait for the informer of %T to sync: %w", obj, ctx.Err())
	}
	return nil
}

// stopCache cancels the member's caches without waiting for them.
func (m *Member) stopCache() {
	m.mu.Lock()
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// TooManyObjects is the error (wrapping ErrTooManyObjects) once the
// member's caches passed MemberOptions.MaxObjects and were stopped, else
// nil. The member is then to be parked and reported.
func (m *Member) TooManyObjects() error {
	return m.objects.exceeded()
}
