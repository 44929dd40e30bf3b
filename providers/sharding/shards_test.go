package sharding_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/providers/sharding"
)

var hub client.Client

// TestMain starts a hub: sharding talks to the hub only.
func TestMain(m *testing.M) {
	os.Exit(fleet.RunTests(m, fleet.Options{Scheme: clusters.NewScheme()}, func(f *fleet.Fleet) (func() error, error) {
		hub = f.Hub.Client
		return nil, nil
	}))
}

// Short leases keep the test quick; their ratios are the defaults'.
var quick = sharding.Options{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RenewInterval: 500 * time.Millisecond}

type replica struct {
	*sharding.Shards
	cancel context.CancelFunc
	done   chan struct{}
}

func newReplica(t *testing.T, namespace, id string) *replica {
	t.Helper()
	return newReplicaVia(t, namespace, id, hub, hub)
}

// newReplicaVia starts a replica that reads Leases through cache and sends
// every other request through api.
func newReplicaVia(t *testing.T, namespace, id string, cache client.Reader, api client.Client) *replica {
	t.Helper()
	opts := quick
	opts.Namespace, opts.ReplicaID = namespace, id
	s, err := sharding.New(opts, cache, api, api, zap.New(zap.UseDevMode(true)))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Shards: s}
	r.start(t)
	return r
}

func (r *replica) start(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel, r.done = cancel, make(chan struct{})
	r.Beat(ctx)
	go func() {
		defer close(r.done)
		r.Run(ctx, nil)
	}()
	t.Cleanup(r.pause)
}

// pause stops the heartbeat as a stopped process would.
func (r *replica) pause() {
	r.cancel()
	<-r.done
}

// twoReplicas starts replicas a and b in a namespace of their own and waits
// until each sees both live.
func twoReplicas(t *testing.T) (ns string, a, b *replica) {
	t.Helper()
	ns = namespace(t)
	a, b = newReplica(t, ns, "a"), newReplica(t, ns, "b")
	waitFor(t, 5*time.Second, "both replicas live for both", func() bool {
		return len(a.Live()) == 2 && len(b.Live()) == 2
	})
	return ns, a, b
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharding-"}}
	if err := hub.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// registration creates a registration Secret called name in ns and returns
// a reference to it, as the owner of its member's fence.
func registration(t *testing.T, ns, name string) metav1.OwnerReference {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := hub.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: s.Name, UID: s.UID}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// acquire takes member's fence for owner with r, failing the test if it cannot.
func acquire(t *testing.T, r *replica, member string, owner metav1.OwnerReference) uint64 {
	t.Helper()
	term, err := r.Acquire(t.Context(), member, owner)
	if err != nil {
		t.Fatalf("%s takes the fence of %s: %v", r.ReplicaID(), member, err)
	}
	return term
}

// unwritten fails the test if member's fence was written since before, for why.
func unwritten(t *testing.T, ns, member string, before *coordinationv1.Lease, why string) {
	t.Helper()
	if rv := fence(t, ns, member).ResourceVersion; rv != before.ResourceVersion {
		t.Errorf("the fence was written again (resourceVersion %s, was %s) %s", rv, before.ResourceVersion, why)
	}
}

func fence(t *testing.T, ns, member string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := hub.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: sharding.FenceName(member)}, l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestReplicasSeeEachOtherAndAgreeOnOwners(t *testing.T) {
	_, a, b := twoReplicas(t)
	if fmt.Sprint(a.Live()) != fmt.Sprint(b.Live()) {
		t.Errorf("replicas disagree on who is live: %v and %v", a.Live(), b.Live())
	}
	// A retiring replica drops out at once, not after its lease expires.
	if err := a.Retire(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.pause()
	took := waitFor(t, quick.LeaseDuration, "b sees a retired", func() bool { return len(b.Live()) == 1 })
	if took >= quick.LeaseDuration-quick.RenewInterval {
		t.Errorf("b took %s to see a retired: as long as an expiry", took)
	}
}

func TestAFenceChangesHandsOnlyWhenReleasedOrItsHolderExpired(t *testing.T) {
	ns, a, b := twoReplicas(t)
	secret := registration(t, ns, "m")

	termA, err := a.Acquire(t.Context(), "m", secret)
	if err != nil {
		t.Fatal(err)
	}
	gateA := a.Gate(termA)
	var held *sharding.HeldError
	if _, err := b.Acquire(t.Context(), "m", secret); !errors.As(err, &held) || held.Holder != "a" {
		t.Fatalf("b took a's fence while a is live: %v", err)
	}
	// Released: b takes it at once.
	if err := a.Release(t.Context(), "m", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(t.Context(), "m", secret); err != nil {
		t.Fatalf("b could not take a released fence: %v", err)
	}
	if got := ptr.Deref(fence(t, ns, "m").Spec.LeaseTransitions, 0); got != 2 {
		t.Errorf("leaseTransitions = %d after two acquisitions, want 2", got)
	}
	if err := b.Release(t.Context(), "m", false); err != nil {
		t.Fatal(err)
	}
	if termA, err = a.Acquire(t.Context(), "m", secret); err != nil {
		t.Fatal(err)
	}
	gateA = a.Gate(termA)

	// a stops renewing (a stopped process): its gate closes before b may
	// take the fence, measured on b's clock.
	a.pause()
	stopped := time.Now()
	closed := waitFor(t, quick.LeaseDuration, "a's gate closes", func() bool { return gateA() != nil })
	if !errors.Is(gateA(), sharding.ErrNotServing) {
		t.Fatalf("gate error %v", gateA())
	}
	if _, err := b.Acquire(t.Context(), "m", secret); !errors.As(err, &held) {
		t.Fatalf("b took the fence %s after a stopped renewing, right when a's gate closed: %v", closed, err)
	}
	waitFor(t, 2*quick.LeaseDuration, "b takes the fence of an expired a", func() bool {
		_, err := b.Acquire(t.Context(), "m", secret)
		return err == nil
	})
	taken := time.Since(stopped)
	if taken < quick.RenewDeadline || taken > quick.LeaseDuration+2*quick.RenewInterval+time.Second {
		t.Errorf("b took the fence %s after a stopped renewing; want after a's gate closed and within the lease duration and a heartbeat", taken)
	}
	t.Logf("a's gate closed %s after it stopped renewing; b took the fence after %s", closed, taken)

	// a comes back: a new term, and its old gate stays closed.
	a.start(t)
	if a.Term() == termA || a.Term() == 0 {
		t.Fatalf("a resumed in term %d, was %d: want a new term", a.Term(), termA)
	}
	if gateA() == nil {
		t.Fatal("a's gate of its old term opened again after it resumed")
	}
	if _, err := a.Acquire(t.Context(), "m", secret); !errors.As(err, &held) || held.Holder != "b" {
		t.Fatalf("a took back b's fence on resuming: %v", err)
	}
}

func TestRemovingAFenceLeavesOthersAlone(t *testing.T) {
	ns, a, b := twoReplicas(t)
	secret := registration(t, ns, "m")
	acquire(t, a, "m", secret)
	if err := b.Release(t.Context(), "m", true); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(fence(t, ns, "m").Spec.HolderIdentity, ""); got != "a" {
		t.Fatalf("b removed or changed a's fence: holder %q", got)
	}
	if err := a.Release(t.Context(), "m", true); err != nil {
		t.Fatal(err)
	}
	l := &coordinationv1.Lease{}
	if err := hub.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: sharding.FenceName("m")}, l); err == nil {
		t.Fatal("the fence of a removed registration is still there")
	}
}

// The two legal names today's scheme made share one fence (a 250-character
// name and the 236-character name its fence was shortened to) each have a
// fence of their own on two replicas; and a Lease under a member's fence
// name that names another member is neither taken nor released.
func TestEveryMemberHasAFenceOfItsOwn(t *testing.T) {
	ns, a, b := twoReplicas(t)
	long := strings.Repeat("abcdefghij", 25)
	sum := sha256.Sum256([]byte(long))
	twin := long[:219] + "-" + hex.EncodeToString(sum[:8])
	if _, err := a.Acquire(t.Context(), long, registration(t, ns, long)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(t.Context(), twin, registration(t, ns, twin)); err != nil {
		t.Fatalf("b could not take the fence of %d-character %s while a holds %d-character %s's: %v", len(twin), twin, len(long), long, err)
	}
	for member, holder := range map[string]string{long: "a", twin: "b"} {
		l := fence(t, ns, member)
		if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != holder || l.Annotations[sharding.ClusterAnnotation] != member {
			t.Errorf("fence %s held by %q for %q, want %q for the %d-character member", l.Name, got, l.Annotations[sharding.ClusterAnnotation], holder, len(member))
		}
	}

	// A Lease named for m that names another member.
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharding.FenceName("m"),
		Labels: map[string]string{sharding.LeaseLabel: "member"}, Annotations: map[string]string{sharding.ClusterAnnotation: "other"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("")}}
	if err := hub.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(t.Context(), "m", registration(t, ns, "m")); !errors.Is(err, sharding.ErrFenceOfAnotherMember) {
		t.Errorf("a took a Lease that names another member as m's fence: %v", err)
	}
	if err := a.Release(t.Context(), "m", true); !errors.Is(err, sharding.ErrFenceOfAnotherMember) {
		t.Errorf("a removed a Lease that names another member as m's fence: %v", err)
	}
	if l := fence(t, ns, "m"); ptr.Deref(l.Spec.HolderIdentity, "") != "" || l.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the other member's Lease was written: holder %q", ptr.Deref(l.Spec.HolderIdentity, ""))
	}
}

// partition stands between a replica and the hub as a cut network does:
// while cut, every request fails.
type partition struct {
	client.Client
	cut atomic.Bool
}

func (p *partition) fail() error {
	if p.cut.Load() {
		return errors.New("partitioned: the hub does not answer")
	}
	return nil
}

func (p *partition) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := p.fail(); err != nil {
		return err
	}
	return p.Client.Get(ctx, key, obj, opts...)
}

func (p *partition) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := p.fail(); err != nil {
		return err
	}
	return p.Client.List(ctx, list, opts...)
}

func (p *partition) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := p.fail(); err != nil {
		return err
	}
	return p.Client.Create(ctx, obj, opts...)
}

func (p *partition) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := p.fail(); err != nil {
		return err
	}
	return p.Client.Update(ctx, obj, opts...)
}

func (p *partition) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := p.fail(); err != nil {
		return err
	}
	return p.Client.Delete(ctx, obj, opts...)
}

// staleCache serves, once frozen, the heartbeat Leases it held then, as an
// informer cache does while its watch is cut and until it has relisted.
type staleCache struct {
	client.Reader
	frozen atomic.Pointer[coordinationv1.LeaseList]
}

func (c *staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*coordinationv1.LeaseList); ok {
		if frozen := c.frozen.Load(); frozen != nil {
			frozen.DeepCopyInto(l)
			return nil
		}
	}
	return c.Reader.List(ctx, list, opts...)
}

// The partition heals before the replica's cache has caught up: in that
// cache every other replica looks expired, yet the replica must not take a
// fence a live replica holds.
func TestAReplicaBackFromAPartitionLeavesALiveReplicasFenceAlone(t *testing.T) {
	ns := namespace(t)
	net, cache := &partition{Client: hub}, &staleCache{Reader: hub}
	b, c := newReplica(t, ns, "b"), newReplicaVia(t, ns, "c", cache, net)
	waitFor(t, 5*time.Second, "both replicas live for both", func() bool {
		return len(b.Live()) == 2 && len(c.Live()) == 2
	})
	secret := registration(t, ns, "m")
	acquire(t, b, "m", secret)

	heartbeats := &coordinationv1.LeaseList{}
	if err := hub.List(t.Context(), heartbeats, client.InNamespace(ns), client.MatchingLabels{sharding.LeaseLabel: "replica"}); err != nil {
		t.Fatal(err)
	}
	cache.frozen.Store(heartbeats)
	net.cut.Store(true)
	waitFor(t, 3*quick.LeaseDuration, "c's term lapses and b expires in its view", func() bool {
		return c.Term() == 0 && !slices.Contains(c.Live(), "b")
	})

	net.cut.Store(false)
	waitFor(t, quick.LeaseDuration, "c serves again", func() bool { return c.Term() != 0 })
	var held *sharding.HeldError
	if _, err := c.Acquire(t.Context(), "m", secret); !errors.As(err, &held) || held.Holder != "b" {
		t.Fatalf("c, back from a partition with a stale cache, took the fence of live b: %v", err)
	}
	waitFor(t, quick.LeaseDuration, "c sees b live again", func() bool { return slices.Contains(c.Live(), "b") })
	if got := ptr.Deref(fence(t, ns, "m").Spec.HolderIdentity, ""); got != "b" {
		t.Errorf("the fence is held by %q, want b", got)
	}
}

// A registration Secret deleted and created again under the same name before
// its member's replica looked at it: the fence must follow the new Secret,
// or the garbage collector deletes it (its owner is gone) while the member
// is still served, and nothing fences the next hand-over.
func TestAFenceFollowsARegistrationCreatedAgain(t *testing.T) {
	ns := namespace(t)
	a := newReplica(t, ns, "a")
	old := registration(t, ns, "m")
	term, err := a.Acquire(t.Context(), "m", old)
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"}}); err != nil {
		t.Fatal(err)
	}
	again := registration(t, ns, "m")
	if again.UID == old.UID {
		t.Fatal("the Secret created again kept its UID")
	}
	if got, err := a.Acquire(t.Context(), "m", again); err != nil || got != term {
		t.Fatalf("a could not keep its fence for the new Secret: term %d, %v (held in %d)", got, err, term)
	}
	given := fence(t, ns, "m")
	if refs := given.OwnerReferences; len(refs) != 1 || refs[0].UID != again.UID {
		t.Errorf("the fence is owned by %v, want only the Secret created again (%s); the old one was %s", refs, again.UID, old.UID)
	}
	// Held for the new Secret, the fence is not written again.
	acquire(t, a, "m", again)
	unwritten(t, ns, "m", given, "though a holds it for the same Secret")
}

// A fence deleted while its replica holds it in the current term (by hand,
// or by a garbage collector that read an earlier owner) is taken again at
// the next Acquire: without it, the member's next hand-over would not wait
// for this replica to drain it.
func TestADeletedFenceIsTakenAgain(t *testing.T) {
	ns := namespace(t)
	a := newReplica(t, ns, "a")
	owner := registration(t, ns, "m")
	term := acquire(t, a, "m", owner)
	taken := fence(t, ns, "m")
	if err := hub.Delete(t.Context(), taken); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Acquire(t.Context(), "m", owner); err != nil || got != term {
		t.Fatalf("Acquire after the fence was deleted: term %d, %v (held in %d)", got, err, term)
	}
	again := fence(t, ns, "m")
	if holder := ptr.Deref(again.Spec.HolderIdentity, ""); holder != "a" || !slices.ContainsFunc(again.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == owner.UID }) {
		t.Errorf("the fence taken again is held by %q and owned by %v, want a and %s", holder, again.OwnerReferences, owner.UID)
	}
}

// A fence whose label was removed by hand is out of the cache's sight, so
// every Acquire would read it from the API server: the next one labels it
// again.
func TestAFenceThatLostItsLabelIsLabelledAgain(t *testing.T) {
	ns := namespace(t)
	a := newReplica(t, ns, "a")
	owner := registration(t, ns, "m")
	acquire(t, a, "m", owner)
	unlabelled := fence(t, ns, "m")
	delete(unlabelled.Labels, sharding.LeaseLabel)
	if err := hub.Update(t.Context(), unlabelled); err != nil {
		t.Fatal(err)
	}
	acquire(t, a, "m", owner)
	if got := fence(t, ns, "m").Labels[sharding.LeaseLabel]; got == "" {
		t.Errorf("the fence is still without its %s label", sharding.LeaseLabel)
	}
}

// laggingCache has not yet seen any fence, as an informer cache right after
// this replica created one.
type laggingCache struct{ client.Reader }

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*coordinationv1.Lease); ok {
		return apierrors.NewNotFound(coordinationv1.Resource("leases"), key.Name)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// A fence this replica holds that its cache does not show yet is read from
// the API server, found as it was taken, and not written again.
func TestAFenceTheCacheLagsBehindIsNotWrittenAgain(t *testing.T) {
	ns := namespace(t)
	a := newReplicaVia(t, ns, "a", laggingCache{hub}, hub)
	owner := registration(t, ns, "m")
	acquire(t, a, "m", owner)
	taken := fence(t, ns, "m")
	acquire(t, a, "m", owner)
	unwritten(t, ns, "m", taken, "because the cache lagged")
}

// A term that lapsed and was renewed between two refreshes leaves the live
// replicas as they were, yet every member gated on the old term must be
// taken again: the new term is announced.
func TestANewTermIsAnnounced(t *testing.T) {
	ns := namespace(t)
	opts := quick
	opts.Namespace, opts.ReplicaID = ns, "a"
	s, err := sharding.New(opts, hub, hub, hub, zap.New(zap.UseDevMode(true)))
	if err != nil {
		t.Fatal(err)
	}
	s.Beat(t.Context())
	first := s.Term()
	select {
	case <-s.Changes():
	default:
		t.Fatal("the first term was not announced")
	}
	s.LapseTerm()
	s.Beat(t.Context())
	if s.Term() == first || s.Term() == 0 {
		t.Fatalf("term %d after a lapse and a renewal, was %d: want a new one", s.Term(), first)
	}
	select {
	case <-s.Changes():
	default:
		t.Fatalf("term %d began with the live replicas unchanged (%v) and was not announced", s.Term(), s.Live())
	}
	// The same term, the same live replicas: nothing to announce.
	s.Beat(t.Context())
	select {
	case <-s.Changes():
		t.Fatalf("a beat in the same term %d with the same live replicas was announced", s.Term())
	default:
	}
}
