package members

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// observation is what one reconcile learned about a member: the Ready
// condition to show, the facts for the MemberCluster status, and how the
// reconcile ends.
type observation struct {
	ready   bool
	reason  string
	message string
	version string
	widgets int32
	// tokenExpiry is the exp of the kubeconfig's token; zero when unknown.
	tokenExpiry time.Time
	// renewal is how the token's renewal stands (renew.go).
	renewal credentials
	// written is the MemberCluster as this reconcile last wrote it, if it
	// did (recordEngaging): the hub's cache may not show that write yet.
	written *v1alpha1.MemberCluster
	result  reconcile.Result
	err     error
}

// reconcile engages, re-engages, probes or disengages the member of one
// registration of sc, and records what it saw in the MemberCluster of the
// same name. The member's checks, cache sync and probes run under
// memberCtx, which the queue may cancel to take the worker back; what is
// written on the hub (fences, MemberCluster, Events) runs under ctx, so
// that a reconcile cut short still records what it did.
func (p *Provider) reconcile(ctx, memberCtx context.Context, sc *sourceController, req reconcile.Request) (reconcile.Result, error) {
	name := multicluster.ClusterName(req.Name)
	log := sc.log.WithValues("cluster", name, "registration", req.NamespacedName)
	select {
	case <-p.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}

	reg, err := sc.Registration(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get the %s registration %s: %w", sc.Kind(), req.NamespacedName, err)
	}
	me := claim{source: sc, key: req.NamespacedName}
	if reg == nil {
		// Gone from the cache: deleted, being deleted, or no longer a
		// registration. Only the registration that held the name stops the
		// member and deletes the MemberCluster.
		if !p.unclaim(name, me) {
			return reconcile.Result{}, nil
		}
		// The MemberCluster goes too; the garbage collector would remove it
		// with a deleted Secret, but not with one that lost its label.
		p.disengage(name, log, "registration is gone")
		clusters.ForgetMetrics(string(name))
		defer p.countOwned()
		if shards := p.shards; shards != nil {
			if err := shards.Release(ctx, req.Name, true); err != nil {
				return reconcile.Result{}, fmt.Errorf("delete the fence of member %q: %w", name, err)
			}
		}
		mc := &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
		if p.shards != nil {
			// The replica that served it, or else its last owner, deletes it.
			owner, err := p.owner(ctx, name, nil)
			if err != nil {
				return reconcile.Result{}, err
			}
			if owner != p.shards.ReplicaID() {
				if err := p.hub.Get(ctx, req.NamespacedName, mc); err != nil || mc.Status.ServedBy != p.shards.ReplicaID() {
					return reconcile.Result{}, client.IgnoreNotFound(err)
				}
			}
		}
		return reconcile.Result{}, p.deleteMemberCluster(ctx, me)
	}
	if holder, ok := p.claimFor(ctx, name, me, reg, log); !ok {
		// Another registration keeps the name; this one waits for it to go.
		log.V(1).Info("Another registration holds the member name", "holder", holder.String())
		return reconcile.Result{}, nil
	}
	var term uint64
	if p.shards != nil {
		defer p.countOwned()
		var done bool
		var result reconcile.Result
		if term, done, result, err = p.serve(ctx, name, reg, log); done {
			return result, err
		}
	}
	hash := reg.Hash
	reg.kind = sc.Kind()
	p.mu.RLock()
	current, parked := p.members[name], p.parked[name]
	p.mu.RUnlock()
	if wait := p.reengageWait(current, parked, hash); wait > 0 {
		// The kubeconfig changed again soon after the last engagement: take
		// its latest version once the interval has passed.
		log.V(1).Info("Kubeconfig changed; re-engaging later", "after", wait)
		return reconcile.Result{RequeueAfter: wait}, nil
	}

	obs := p.observe(ctx, memberCtx, name, reg, engagement{hash: hash, term: term}, current, parked, log)
	p.renewToken(ctx, name, reg, &obs, log)
	if err := p.recordStatus(ctx, reg.Owner, obs); err != nil {
		return reconcile.Result{}, clusters.PrintableError(errors.Join(obs.err, err))
	}
	return obs.result, clusters.PrintableError(obs.err)
}

// observe acts on the registration given the member's current engagement
// or parking, if any; next holds the registration's hash and the sharding
// term to engage the member in. The member is checked under memberCtx.
func (p *Provider) observe(ctx, memberCtx context.Context, name multicluster.ClusterName, reg *Registration, next engagement,
	current *registration, parked *parking, log logr.Logger) observation {
	hash := next.hash
	switch {
	case current != nil && current.hash == hash:
		obs := p.probe(memberCtx, name, current, log)
		obs.tokenExpiry = current.cfg.TokenExpiry
		return obs
	case parked != nil && parked.hash == hash:
		obs := p.probeParked(memberCtx, name, parked, log)
		obs.tokenExpiry = parked.cfg.TokenExpiry
		return obs
	}

	cfg, err := reg.Config()
	if err != nil {
		p.disengage(name, log, "registration is not usable")
		return observation{reason: refusalReason(err), message: err.Error(),
			err: reconcile.TerminalError(fmt.Errorf("%s %s/%s: %w", reg.kind,
				reg.Owner.GetNamespace(), reg.Owner.GetName(), err))}
	}
	if current != nil && current.cfg.SameServerAndIdentity(cfg) && current.member.SetToken(cfg.REST.BearerToken) {
		// Only the bearer token changed: the member keeps its caches and
		// connections, and its next requests carry the new token.
		// The next probe, at its interval, tries the new token.
		log.Info("Swapped the member's token in place")
		current.hash, current.cfg = hash, cfg
		return observation{ready: true, reason: v1alpha1.MemberEngagedReason,
			message: fmt.Sprintf("engaged through context %q; token replaced", cfg.Context),
			version: current.version, widgets: -1, tokenExpiry: cfg.TokenExpiry,
			result: reconcile.Result{RequeueAfter: p.opts.ProbeInterval}}
	}
	// Best effort: the outcome of the engagement is written in any case.
	written, err := p.recordEngaging(ctx, reg.Owner, current != nil || parked != nil)
	if err != nil {
		log.Info("Cannot show the engagement in the MemberCluster", "error", err.Error())
	}
	p.disengage(name, log, "kubeconfig changed")
	next.cfg = cfg
	obs := p.engage(memberCtx, name, next, log)
	obs.tokenExpiry, obs.written = cfg.TokenExpiry, written
	return obs
}

// reengageWait is how long a changed registration (whose hash is hash) must
// wait before its member is engaged again: zero unless the member, engaged or
// parked, was engaged less than MinReengageInterval ago with another one.
func (p *Provider) reengageWait(current *registration, parked *parking, hash [sha256.Size]byte) time.Duration {
	var last engagement
	switch {
	case current != nil:
		last = current.engagement
	case parked != nil:
		last = parked.engagement
	default:
		return 0
	}
	if last.hash == hash {
		return 0
	}
	return p.opts.MinReengageInterval - time.Since(last.since)
}

// engage checks a new member, starts its caches with a bound and engages it
// with e's kubeconfig (cfg, hash) in e's sharding term. The member lives
// as long as the provider runs, but the check and the sync end with ctx:
// when ctx ends first, the member is stopped (its connections closed, so
// that a request without a deadline of ctx's, discovery say, fails at once)
// and nothing is engaged.
func (p *Provider) engage(ctx context.Context, name multicluster.ClusterName, e engagement, log logr.Logger) observation {
	cfg := e.cfg
	member, err := clusters.New(string(name), cfg, clusters.MemberOptions{Scheme: p.opts.Scheme, Logger: log,
		CacheByObject: p.opts.CacheByObject, Transform: p.opts.CacheTransform, MaxObjects: p.opts.MaxObjects, Gate: p.gate(e.term)})
	if err != nil {
		return observation{reason: v1alpha1.MemberInvalidKubeconfigReason, message: err.Error(), err: reconcile.TerminalError(err)}
	}
	start := time.Now()
	stopOnCancel := context.AfterFunc(ctx, member.Stop)
	version, err := member.Preflight(ctx, p.opts.ProbeTimeout, p.opts.WatchedObjects...)
	if err == nil {
		err = member.StartAndSync(p.runCtx, p.opts.SyncTimeout, p.opts.WatchedObjects...)
	}
	if !stopOnCancel() {
		// ctx ended while the member was checked or synced: it is being
		// stopped, and whatever failed, failed because of that.
		took := time.Since(start).Round(time.Millisecond)
		if err == nil {
			err = fmt.Errorf("%w after %s, its cache synced", context.Cause(ctx), took)
		} else {
			err = fmt.Errorf("%w after %s: %w", context.Cause(ctx), took, err)
		}
	}
	if err != nil {
		member.Stop()
		obs := failed(err)
		obs.version = version
		if obs.reason == v1alpha1.MemberWidgetCRDMissingReason {
			// Waiting on something external: look again later, no error.
			log.Info("Member does not serve the Widget API yet", "retryAfter", p.opts.MissingKindRetry)
			obs.result, obs.err = reconcile.Result{RequeueAfter: p.opts.MissingKindRetry}, nil
			return obs
		}
		if obs.reason == v1alpha1.MemberTooManyObjectsReason {
			return p.overfullRetry(obs, log)
		}
		obs.err = fmt.Errorf("engage member %q: %w", name, err)
		return obs
	}

	e.version, e.since = version, time.Now()
	reg := &registration{member: member, engagement: e}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		member.Stop()
		return observation{reason: v1alpha1.MemberUnreachableReason, message: "the hub replica is shutting down", err: errors.New("shutting down")}
	}
	for _, idx := range p.indexers {
		if err := member.GetFieldIndexer().IndexField(member.Context(), idx.obj, idx.field, idx.extract); err != nil {
			p.mu.Unlock()
			member.Stop()
			return observation{reason: v1alpha1.MemberUnreachableReason, message: err.Error(), err: err}
		}
	}
	p.members[name] = reg
	p.mu.Unlock()

	if err := p.aware.Engage(member.Context(), name, member); err != nil {
		p.disengage(name, log, "engage failed")
		return observation{reason: v1alpha1.MemberUnreachableReason, message: err.Error(), err: fmt.Errorf("engage member %q: %w", name, err)}
	}
	clusters.MemberEngagedSince.WithLabelValues(string(name)).Set(float64(reg.since.Unix()))
	message := fmt.Sprintf("engaged through context %q", cfg.Context)
	if cfg.Contexts > 1 {
		message += fmt.Sprintf(" (the current context of %d)", cfg.Contexts)
	}
	log.Info("Engaged member", "context", cfg.Context, "host", cfg.REST.Host, "version", v1alpha1.Printable(version, v1alpha1.MaxVersionLength), "took", time.Since(start).Round(time.Millisecond))
	obs := observation{ready: true, reason: v1alpha1.MemberEngagedReason, message: message,
		version: version, widgets: p.countWidgets(ctx, member), result: reconcile.Result{RequeueAfter: p.opts.ProbeInterval}}
	reg.probedAt, reg.probed = time.Now(), obs // engaging checked what a probe checks
	return obs
}

// probe checks an engaged member's health with the checks of its
// engagement (Member.Preflight: version, readiness, the Widget API served,
// list permission), so that a member that loses its RBAC or its CRD is seen,
// not only one that stops answering. After FailureThreshold failures in a
// row the member is parked.
func (p *Provider) probe(ctx context.Context, name multicluster.ClusterName, reg *registration, log logr.Logger) observation {
	if err := reg.member.TooManyObjects(); err != nil {
		return p.parkOverfull(name, reg, err, log)
	}
	if since := time.Since(reg.probedAt); since < p.opts.ProbeInterval/2 {
		// Probed a moment ago (a Secret event came between two probes): say
		// the same again rather than probe the member more often than the
		// interval, however often the Secret is written.
		obs := reg.probed
		obs.result = reconcile.Result{RequeueAfter: p.opts.ProbeInterval - since}
		return obs
	}
	obs := p.probeNow(ctx, name, reg, log)
	reg.probedAt, reg.probed = time.Now(), obs
	return obs
}

func (p *Provider) probeNow(ctx context.Context, name multicluster.ClusterName, reg *registration, log logr.Logger) observation {
	start := time.Now()
	version, err := reg.member.Preflight(ctx, p.opts.ProbeTimeout, p.opts.WatchedObjects...)
	clusters.MemberProbeDuration.WithLabelValues(string(name)).Observe(time.Since(start).Seconds())
	next := reconcile.Result{RequeueAfter: p.opts.ProbeInterval}
	if err == nil {
		reg.failures, reg.lastError, reg.version = 0, "", version
		obs := observation{ready: true, reason: v1alpha1.MemberEngagedReason, message: fmt.Sprintf("engaged through context %q", reg.cfg.Context),
			version: version, widgets: p.countWidgets(ctx, reg.member), result: next}
		if failing := reg.member.FailingWidgets(); failing >= minFailingWidgets && obs.widgets >= 0 && failing*2 > int(obs.widgets) {
			obs.ready, obs.reason = false, v1alpha1.MemberDegradedReason
			obs.message = fmt.Sprintf("answers its probes, but the latest reconcile failed for %d of its %d Widgets; see the Widgets' Ready conditions", failing, obs.widgets)
		}
		return obs
	}
	clusters.MemberProbeFailures.WithLabelValues(string(name)).Inc()
	reg.failures++
	reg.lastError = withoutMemberText(err)
	if reg.failures < p.opts.FailureThreshold {
		log.V(1).Info("Probe failed", "failures", reg.failures, "error", reg.lastError)
		return observation{ready: true, reason: v1alpha1.MemberEngagedReason, message: "engaged; last probe failed: " + reg.lastError,
			version: reg.version, widgets: p.countWidgets(ctx, reg.member), result: next}
	}
	obs := failed(err)
	obs.version, obs.widgets, obs.result, obs.err = reg.version, -1, next, nil
	obs.message = fmt.Sprintf("%d probes in a row failed: %s", reg.failures, obs.message)
	p.park(name, reg, log, obs.reason)
	return obs
}

// minFailingWidgets is how many of a member's Widgets must fail their latest
// reconcile, and be more than half of its Widgets, for it to be Degraded. A
// verdict on each probe from the Widgets' current outcomes, not on attempts
// over a window: one Widget retried at its backoff is one failing Widget,
// and the member is Engaged again as soon as its Widgets recover.
const minFailingWidgets = 10

// park stops an engaged member that keeps failing its probes: its caches
// stop, its connections close (so its in-flight requests fail at once), and
// its queued requests are dropped as the member is no longer engaged. Nothing
// is retried against it until a probe passes; then it is engaged afresh, its
// caches relist, and every Widget changed meanwhile is reconciled.
func (p *Provider) park(name multicluster.ClusterName, reg *registration, log logr.Logger, why string) {
	prober, err := clusters.New(string(name), reg.cfg, clusters.MemberOptions{Scheme: p.opts.Scheme, Logger: log, Gate: p.gate(reg.term)})
	p.disengage(name, log, "parked: "+why)
	if err != nil {
		return // the next reconcile builds the member from the Secret again
	}
	p.mu.Lock()
	p.parked[name] = &parking{engagement: reg.engagement, prober: prober}
	p.mu.Unlock()
}

// probeParked probes a parked member and engages it afresh once it passes.
func (p *Provider) probeParked(ctx context.Context, name multicluster.ClusterName, pk *parking, log logr.Logger) observation {
	start := time.Now()
	_, err := pk.prober.Preflight(ctx, p.opts.ProbeTimeout, p.opts.WatchedObjects...)
	clusters.MemberProbeDuration.WithLabelValues(string(name)).Observe(time.Since(start).Seconds())
	if err != nil {
		clusters.MemberProbeFailures.WithLabelValues(string(name)).Inc()
		obs := failed(err)
		obs.version, obs.widgets, obs.result, obs.err = pk.version, -1, reconcile.Result{RequeueAfter: p.opts.ProbeInterval}, nil
		obs.message = "parked until it passes a probe: " + obs.message
		return obs
	}
	log.Info("Parked member passes its probe; engaging it afresh")
	p.disengage(name, log, "member answers again")
	return p.engage(ctx, name, pk.engagement, log)
}

// failed turns an error from a member into the Ready condition to show. The
// message is the hub's own words: an answer of the member shows as its HTTP
// code and reason, never its body.
func failed(err error) observation {
	obs := observation{reason: v1alpha1.MemberUnreachableReason, message: withoutMemberText(err), err: err}
	switch {
	case errors.Is(err, clusters.ErrDestinationRefused):
		obs.reason = v1alpha1.MemberUnsafeKubeconfigReason
		obs.message = "the server's address is refused: " + obs.message
		obs.err = reconcile.TerminalError(err)
	case errors.Is(err, clusters.ErrResponseTooLarge):
		obs.reason = v1alpha1.MemberResponseTooLargeReason
		obs.message = "an answer of the member was larger than the hub accepts and was not read further: " + obs.message
	case errors.Is(err, clusters.ErrRedirectRefused):
		obs.reason = v1alpha1.MemberRedirectRefusedReason
		obs.message = "the member answered with a redirect, which the hub never follows: " + obs.message
	case errors.Is(err, clusters.ErrTooManyObjects):
		obs.reason = v1alpha1.MemberTooManyObjectsReason
		obs.message = "the member's Widgets and Deployments are more than this hub holds per member (--member-max-objects): " + obs.message
	case errors.Is(err, clusters.ErrKindMissing):
		obs.reason = v1alpha1.MemberWidgetCRDMissingReason
		obs.message = "the member does not serve the Widget API (install the widgets.widgethub.io CRD there): " + obs.message
	case apierrors.IsUnauthorized(err):
		obs.reason = v1alpha1.MemberUnauthorizedReason
		obs.message = "the member rejects the kubeconfig's credentials (401): " + obs.message
	case apierrors.IsForbidden(err):
		obs.reason = v1alpha1.MemberForbiddenReason
		obs.message = "the member forbids what widgethub needs (403; grant config/member-rbac): " + obs.message
	}
	return obs
}

// withoutMemberText is err's message with the member's own words (the message
// or body of an API error) replaced by the HTTP code and reason, made
// printable and bounded as a condition's message (v1alpha1.TruncateMessage):
// other errors may still quote the member (a certificate's names, say).
func withoutMemberText(err error) string {
	return v1alpha1.TruncateMessage(replaceAnswer(err))
}

func replaceAnswer(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	s := status.Status()
	answer := fmt.Sprintf("the member answered %d %s", s.Code, s.Reason)
	// The wrapping words are the hub's: keep them around the answer.
	msg := err.Error()
	if se, ok := status.(error); ok {
		if before, after, found := strings.Cut(msg, se.Error()); found {
			return before + answer + after
		}
	}
	return answer
}

// countWidgets counts the member's Widgets from its cache; -1 means unknown.
func (p *Provider) countWidgets(ctx context.Context, member *clusters.Member) int32 {
	list := &v1alpha1.WidgetList{}
	if err := member.GetClient().List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return -1
	}
	return int32(len(list.Items))
}

// take removes the member called name from the engaged and parked ones and
// stops its prober if it was parked. It returns its registration if it was
// engaged, and whether it was either.
func (p *Provider) take(name multicluster.ClusterName) (r *registration, served bool) {
	p.mu.Lock()
	r, engaged := p.members[name]
	pk, parked := p.parked[name]
	delete(p.members, name)
	delete(p.parked, name)
	p.mu.Unlock()
	if parked {
		pk.prober.Stop()
	}
	return r, engaged || parked
}

// takeAll empties the engaged and parked members, for a provider that stops.
func (p *Provider) takeAll() (map[multicluster.ClusterName]*registration, map[multicluster.ClusterName]*parking) {
	p.mu.Lock()
	defer p.mu.Unlock()
	regs, parked := p.members, p.parked
	p.members, p.parked = map[multicluster.ClusterName]*registration{}, map[multicluster.ClusterName]*parking{}
	return regs, parked
}

// disengage stops the member called name, engaged or parked, if any, and
// waits for its cache to stop.
func (p *Provider) disengage(name multicluster.ClusterName, log logr.Logger, why string) {
	r, _ := p.take(name)
	if r == nil {
		return
	}
	r.member.Stop()
	clusters.MemberEngagedSince.WithLabelValues(string(name)).Set(0)
	log.Info("Disengaged member", "why", why)
}
