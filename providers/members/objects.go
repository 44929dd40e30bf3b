package members

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// parkOverfull parks an engaged member whose caches passed
// Options.MaxObjects (they stopped themselves already; parking releases
// them) and reports it with reason TooManyObjects. Like any parked member,
// it is engaged afresh, with empty caches, once it passes a probe; an
// engagement that passes the bound again fails and is retried with backoff.
func (p *Provider) parkOverfull(name multicluster.ClusterName, reg *registration, err error, log logr.Logger) observation {
	log.Info("Member's caches passed the bound on objects; parking it", "maxObjects", p.opts.MaxObjects)
	obs := failed(err)
	obs.version, obs.widgets, obs.err = reg.version, -1, nil
	obs.result = reconcile.Result{RequeueAfter: p.opts.ProbeInterval}
	p.park(name, reg, log, obs.reason)
	return obs
}

// overfullRetry is the outcome of an engagement whose caches passed
// Options.MaxObjects: tried again after MaxRetryDelay, not with the
// backoff of errors, so that a member that stays too big costs one list of
// at most the bound per MaxRetryDelay.
func (p *Provider) overfullRetry(obs observation, log logr.Logger) observation {
	log.Info("Member has more objects than the hub holds per member", "maxObjects", p.opts.MaxObjects, "retryAfter", p.opts.MaxRetryDelay)
	obs.result, obs.err = reconcile.Result{RequeueAfter: p.opts.MaxRetryDelay}, nil
	return obs
}
