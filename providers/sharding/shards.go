package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

const (
	// LeaseLabel marks the Leases of sharding: "replica" for a heartbeat,
	// "member" for a member's fence.
	LeaseLabel = "widgethub.io/lease"
	// ClusterAnnotation on a fence names its member.
	ClusterAnnotation = "widgethub.io/cluster"

	roleReplica = "replica"
	roleMember  = "member"

	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRenewInterval:
	// a replica renews every 2s, stops serving 7s after its last renewal
	// began, and is taken over 10s after the others last saw it renew.
	DefaultLeaseDuration = 10 * time.Second
	DefaultRenewDeadline = 7 * time.Second
	DefaultRenewInterval = 2 * time.Second
)

// ErrNotServing is returned by a Gate once the replica's term has lapsed.
var ErrNotServing = errors.New("this replica no longer serves the member (its sharding lease lapsed)")

// HeldError tells that another live replica holds a member's fence.
type HeldError struct{ Holder string }

func (e *HeldError) Error() string {
	return fmt.Sprintf("the member is still served by replica %q", e.Holder)
}

// LeaseSelector selects the Leases this package reads, for the hub cache.
func LeaseSelector() labels.Selector {
	sel, _ := labels.Parse(LeaseLabel)
	return sel
}

// Options configure Shards.
type Options struct {
	// Namespace holds the Leases (the registration namespace).
	Namespace string
	// ReplicaID names this replica; unique among the replicas (a Pod name).
	ReplicaID string
	// LeaseDuration is how long the others wait, after last seeing this
	// replica renew, before they take its members.
	LeaseDuration time.Duration
	// RenewDeadline is how long this replica serves after its last renewal
	// began; shorter than LeaseDuration by at least a request's round trip.
	RenewDeadline time.Duration
	// RenewInterval is the time between renewals.
	RenewInterval time.Duration
	// AllowPinsBeyondFairShare has Assign follow every pin to a live
	// replica, beyond the replica's fair share too.
	AllowPinsBeyondFairShare bool
}

// Shards is one replica's view of the sharded hub: its heartbeat, the live
// replicas, and the fences it holds. Run runs the heartbeat.
type Shards struct {
	opts Options
	// reader reads Leases from the hub cache; api reads them from the API
	// server where a stale copy would do harm; writer writes them.
	reader, api client.Reader
	writer      client.Client
	log         logr.Logger
	changes     chan event.GenericEvent

	mu sync.Mutex
	// term counts the replica's unbroken periods of renewal; validUntil
	// ends the current one unless renewed.
	term       uint64
	validUntil time.Time
	own        *coordinationv1.Lease
	// seen is when each other replica's heartbeat was last seen to change.
	seen map[string]sighting
	live []string
	// announcedTerm is the term the last announcement of Changes was for.
	announcedTerm uint64
	// held maps each member whose fence this replica holds to the term it
	// was acquired in and the registration that owns the fence.
	held map[string]heldFence
}

// heldFence is a fence this replica holds: the term it was taken in, and the
// UID of the registering object it was taken for (the fence's owner).
type heldFence struct {
	term  uint64
	owner types.UID
}

type sighting struct {
	resourceVersion string
	at              time.Time
	duration        time.Duration
	replica         string
}

// New returns the Shards of one replica. reader may be a cache (it must
// hold the Leases of LeaseSelector); api reads from the API server.
func New(opts Options, reader, api client.Reader, writer client.Client, log logr.Logger) (*Shards, error) {
	if opts.ReplicaID == "" || opts.Namespace == "" {
		return nil, errors.New("sharding: ReplicaID and Namespace are required")
	}
	if errs := validation.IsDNS1123Subdomain(heartbeatName(opts.ReplicaID)); len(errs) > 0 {
		return nil, fmt.Errorf("sharding: replica id %q does not make a Lease name: %s", opts.ReplicaID, strings.Join(errs, "; "))
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline == 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RenewInterval == 0 {
		opts.RenewInterval = DefaultRenewInterval
	}
	if opts.RenewDeadline >= opts.LeaseDuration || opts.RenewInterval >= opts.RenewDeadline {
		return nil, fmt.Errorf("sharding: need RenewInterval (%s) < RenewDeadline (%s) < LeaseDuration (%s)",
			opts.RenewInterval, opts.RenewDeadline, opts.LeaseDuration)
	}
	return &Shards{opts: opts, reader: reader, api: api, writer: writer, log: log.WithValues("replica", opts.ReplicaID),
		changes: make(chan event.GenericEvent, 1), seen: map[string]sighting{}, held: map[string]heldFence{}}, nil
}

// ReplicaID is this replica's id.
func (s *Shards) ReplicaID() string { return s.opts.ReplicaID }

// Assign is Assign with this replica's options.
func (s *Shards) Assign(regs []Registration, live []string) (owners map[string]string, unpinned map[string]Unpinned) {
	return Assign(regs, live, s.opts.AllowPinsBeyondFairShare)
}

// RenewInterval is the time between heartbeats, which is also how soon a
// change of the live replicas is noticed.
func (s *Shards) RenewInterval() time.Duration { return s.opts.RenewInterval }

// Changes receives an event whenever the live replicas or this replica's
// term change: every registration must then be looked at again.
func (s *Shards) Changes() <-chan event.GenericEvent { return s.changes }

// Beat renews the heartbeat once and looks at the others'.
func (s *Shards) Beat(ctx context.Context) {
	s.renew(ctx)
	s.refresh(ctx)
}

// Run beats every RenewInterval until ctx ends; kick asks for an early look
// at the Leases (on a Lease event), taken when a heartbeat appeared or went. It does not delete the heartbeat: Retire
// does, once the members are handed over.
func (s *Shards) Run(ctx context.Context, kick <-chan struct{}) {
	tick := time.NewTicker(s.opts.RenewInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.Beat(ctx)
		case <-kick:
			if s.membershipChanged(ctx) {
				s.refresh(ctx)
			}
		}
	}
}

// Term is the current term, zero when this replica does not serve.
func (s *Shards) Term() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.termLocked(time.Now())
}

func (s *Shards) termLocked(now time.Time) uint64 {
	if now.Before(s.validUntil) {
		return s.term
	}
	return 0
}

// Gate returns the check to make before every request to a member whose
// fence was acquired in term: it refuses once that term is over.
func (s *Shards) Gate(term uint64) func() error {
	return func() error {
		if term == 0 || s.Term() != term {
			return ErrNotServing
		}
		return nil
	}
}

// Live returns the live replicas, sorted; this one only while it serves.
func (s *Shards) Live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.live)
}

// heartbeatName is the name of a replica's heartbeat Lease.
func heartbeatName(replica string) string { return "widgethub-replica-" + replica }

// renew renews this replica's heartbeat, creating it when missing. A
// renewal that begins after the term ran out starts a new term.
func (s *Shards) renew(ctx context.Context) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opts.RenewDeadline-s.opts.RenewInterval)
	defer cancel()
	s.mu.Lock()
	lease := s.own.DeepCopy()
	s.mu.Unlock()
	now := metav1.NewMicroTime(began)
	var err error
	if lease != nil {
		err = s.update(ctx, lease, now)
	}
	if lease == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Not known yet, or changed or deleted (the others delete it once
		// it expired): read it again, and create it when missing.
		lease = &coordinationv1.Lease{}
		err = s.api.Get(ctx, client.ObjectKey{Namespace: s.opts.Namespace, Name: heartbeatName(s.opts.ReplicaID)}, lease)
		switch {
		case apierrors.IsNotFound(err):
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: heartbeatName(s.opts.ReplicaID),
				Labels: map[string]string{LeaseLabel: roleReplica}}}
			s.stamp(lease, now)
			err = s.writer.Create(ctx, lease)
		case err == nil:
			err = s.update(ctx, lease, now)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.own = nil // read it afresh next time
		s.log.Error(err, "Could not renew the replica's heartbeat Lease", "servesFor", time.Until(s.validUntil).Round(time.Millisecond))
		return
	}
	s.own = lease
	if !began.Before(s.validUntil) {
		s.term++
		if s.term > 1 {
			s.log.Info("Heartbeat renewed after its term ran out: every member is handed over afresh", "term", s.term)
		}
	}
	s.validUntil = began.Add(s.opts.RenewDeadline)
}

func (s *Shards) update(ctx context.Context, lease *coordinationv1.Lease, now metav1.MicroTime) error {
	s.stamp(lease, now)
	return s.writer.Update(ctx, lease)
}

func (s *Shards) stamp(lease *coordinationv1.Lease, now metav1.MicroTime) {
	lease.Spec.HolderIdentity = ptr.To(s.opts.ReplicaID)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(s.opts.LeaseDuration / time.Second))
	lease.Spec.RenewTime = &now
}

// refresh recomputes the live replicas from the heartbeats on the API server
// and announces a change of them or of the term. Liveness is never judged
// from the hub cache: after a partition the cache still holds the Leases from
// before it, and every other replica would look expired. When the list
// fails, the sightings only age: this replica's view then shrinks (the
// others expire in it, and it drops out itself once its term lapses), which
// makes it claim nothing.
func (s *Shards) refresh(ctx context.Context) {
	listCtx, cancel := context.WithTimeout(ctx, s.opts.RenewInterval)
	defer cancel()
	list := &coordinationv1.LeaseList{}
	err := s.api.List(listCtx, list, client.InNamespace(s.opts.Namespace), client.MatchingLabels{LeaseLabel: roleReplica})
	if err != nil && ctx.Err() == nil {
		s.log.Error(err, "Could not list the replicas' heartbeat Leases")
	}
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	var present map[string]bool
	if err == nil {
		present = map[string]bool{}
		for i := range list.Items {
			if s.sightLocked(&list.Items[i], now) {
				present[list.Items[i].Name] = true
			}
		}
	}
	var live []string
	var expired []*coordinationv1.Lease
	for name, sg := range s.seen {
		switch {
		case present != nil && !present[name]:
			delete(s.seen, name)
		case now.Sub(sg.at) < sg.duration:
			live = append(live, sg.replica)
		case present != nil:
			expired = append(expired, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: name, ResourceVersion: sg.resourceVersion}})
		}
	}
	term := s.termLocked(now)
	if term != 0 {
		live = append(live, s.opts.ReplicaID)
	}
	slices.Sort(live)
	live = slices.Compact(live)
	// A new term is announced even when the live replicas look the same (a
	// term that lapsed and was renewed between two refreshes): the members
	// gated on the old term must be taken again.
	liveChanged := !slices.Equal(live, s.live)
	changed := liveChanged || term != s.announcedTerm
	if liveChanged {
		s.log.Info("Live replicas changed", "live", live, "before", s.live)
		s.live = live
	}
	s.announcedTerm = term
	s.mu.Unlock()
	for _, lease := range expired {
		// Unchanged since it expired here: remove it, so that a replica
		// starting later need not wait a lease duration to see it is gone.
		rv := lease.ResourceVersion
		if err := s.writer.Delete(ctx, lease, client.Preconditions{ResourceVersion: &rv}); err == nil {
			s.log.Info("Deleted the heartbeat Lease of a replica that stopped renewing it", "lease", lease.Name)
		}
	}
	if changed {
		select {
		case s.changes <- event.GenericEvent{Object: &coordinationv1.Lease{}}:
		default: // one pending announcement is enough
		}
	}
}

// sightLocked records a heartbeat Lease read from the API server: its
// expiry is counted on this replica's clock from the moment its
// resourceVersion was first seen, as client-go's leader election does, so
// the replicas' clocks need not agree. It reports false for a Lease that
// is not another replica's heartbeat.
func (s *Shards) sightLocked(l *coordinationv1.Lease, now time.Time) bool {
	replica := ptr.Deref(l.Spec.HolderIdentity, "")
	if replica == "" || replica == s.opts.ReplicaID {
		return false
	}
	if old, ok := s.seen[l.Name]; ok && old.resourceVersion == l.ResourceVersion {
		return true
	}
	s.seen[l.Name] = sighting{resourceVersion: l.ResourceVersion, at: now, replica: replica,
		duration: time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, int32(s.opts.LeaseDuration/time.Second))) * time.Second}
	return true
}

// membershipChanged tells, from the hub cache, whether a heartbeat Lease
// appeared or went since the last refresh: a hint only, for an early look.
func (s *Shards) membershipChanged(ctx context.Context) bool {
	list := &coordinationv1.LeaseList{}
	if err := s.reader.List(ctx, list, client.InNamespace(s.opts.Namespace), client.MatchingLabels{LeaseLabel: roleReplica}); err != nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	others := 0
	for i := range list.Items {
		l := &list.Items[i]
		if ptr.Deref(l.Spec.HolderIdentity, "") == s.opts.ReplicaID {
			continue
		}
		if _, ok := s.seen[l.Name]; !ok {
			return true
		}
		others++
	}
	return others != len(s.seen)
}

// holderExpired tells whether replica, holding a fence this replica wants,
// has stopped renewing its heartbeat, read from the API server now: the
// live replicas computed at the last refresh may predate this term.
func (s *Shards) holderExpired(ctx context.Context, replica string) (bool, error) {
	lease := &coordinationv1.Lease{}
	err := s.api.Get(ctx, client.ObjectKey{Namespace: s.opts.Namespace, Name: heartbeatName(replica)}, lease)
	if apierrors.IsNotFound(err) {
		// Deleted: retired after releasing its fences, or removed by a
		// replica that saw it expire.
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get the heartbeat of replica %q: %w", replica, err)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sightLocked(lease, now) {
		return false, nil
	}
	sg := s.seen[lease.Name]
	return now.Sub(sg.at) >= sg.duration, nil
}

// Retire deletes this replica's heartbeat, so that the others take over at
// once; call it once every fence it held is released (else the others wait
// for the heartbeat to expire, which is safe too).
func (s *Shards) Retire(ctx context.Context) error {
	s.mu.Lock()
	held := len(s.held)
	s.validUntil = time.Time{}
	s.mu.Unlock()
	if held > 0 {
		return fmt.Errorf("sharding: %d fences still held; the heartbeat is left to expire", held)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: heartbeatName(s.opts.ReplicaID)}}
	return client.IgnoreNotFound(s.writer.Delete(ctx, lease))
}
