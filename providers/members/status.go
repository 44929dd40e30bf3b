package members

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// recordStatus writes what obs saw into the MemberCluster owned by the
// registering object owner, records a hub Event on owner when Ready changes,
// and sets the metrics. It returns how soon status.lastProbeTime is due to
// be rewritten with nothing else changed.
func (p *Provider) recordStatus(ctx context.Context, owner client.Object, obs observation) (time.Duration, error) {
	name := owner.GetName()
	ready := 0.0
	if obs.ready {
		ready = 1
	}
	memberReady.WithLabelValues(name).Set(ready)
	if obs.widgets >= 0 {
		memberWidgets.WithLabelValues(name).Set(float64(obs.widgets))
	}

	mc := obs.written
	if mc == nil {
		var err error
		if mc, err = p.memberCluster(ctx, owner, true); err != nil {
			return 0, err
		}
	}
	refreshIn, err := p.writeStatus(ctx, owner, mc, obs)
	if !apierrors.IsConflict(err) {
		return refreshIn, err
	}
	// mc was behind: most often the cache, which has not seen this
	// registration's last write yet. Once more from the API server, if owner
	// still controls the MemberCluster; else the conflict is retried, and
	// the retry reads afresh whether this registration still serves it.
	live := &v1alpha1.MemberCluster{}
	if getErr := p.apiReader.Get(ctx, client.ObjectKeyFromObject(mc), live); getErr != nil || !controlledBy(live, owner) {
		return 0, err
	}
	return p.writeStatus(ctx, owner, live, obs)
}

// controlledBy tells whether owner is mc's controller.
func controlledBy(mc *v1alpha1.MemberCluster, owner client.Object) bool {
	controller := metav1.GetControllerOfNoCopy(mc)
	return controller != nil && controller.UID == owner.GetUID()
}

// writeStatus writes what obs saw into mc, as read, and records a hub Event
// on owner when Ready changes. It returns how soon lastProbeTime is due.
func (p *Provider) writeStatus(ctx context.Context, owner client.Object, mc *v1alpha1.MemberCluster, obs observation) (time.Duration, error) {
	name := owner.GetName()
	status := *mc.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.MemberReady, Status: metav1.ConditionFalse, Reason: obs.reason,
		Message: v1alpha1.TruncateMessage(obs.message)}
	if obs.ready {
		cond.Status = metav1.ConditionTrue
	}
	setProgress(&status.Conditions, obs.ready, cond.Reason, cond.Message)
	changed := readyDiffers(mc, cond)
	if changed {
		// The cache may not show our last status write yet (a reconcile
		// right after the MemberCluster was created, say): ask the API
		// server before recording a transition Event, so that one
		// transition is one Event.
		live := &v1alpha1.MemberCluster{}
		if err := p.apiReader.Get(ctx, client.ObjectKeyFromObject(mc), live); err == nil {
			changed = readyDiffers(live, cond)
		}
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if obs.version != "" {
		// The member chooses its version: made printable and bounded
		// before the write, so that the CRD's maxLength never refuses it.
		status.KubernetesVersion = v1alpha1.Printable(obs.version, v1alpha1.MaxVersionLength)
	}
	if obs.widgets >= 0 {
		status.Widgets = obs.widgets
	}
	expiring := setCredentialsExpiring(&status, obs.tokenExpiry, obs.renewal, p.opts.Renewal.ExpiryWarning, time.Now())
	recordCredentials(name, obs.tokenExpiry, expiring)
	p.setNameConflict(&status, name)
	p.ownership.report(&status, name)
	now := metav1.Now()
	// Due ProbeRefresh after it was written, less how late this member's
	// probes come: the probe that rewrites it then ends about on time.
	refreshIn := p.opts.ProbeRefresh - obs.late
	if lastProbe := status.LastProbeTime; lastProbe != nil && equality.Semantic.DeepEqual(mc.Status, status) {
		if due := refreshIn - now.Sub(lastProbe.Time); due > 0 {
			return due, nil
		}
	}
	status.LastProbeTime = &now
	// The status is computed from mc as read: written only onto that
	// version, so that a write from a stale cache, or from a registration
	// that lost the name meanwhile, cannot put back what a newer write
	// (another registration's reown, say) replaced.
	patch := client.MergeFromWithOptions(mc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	mc.Status = status
	if err := p.hub.Status().Patch(ctx, mc, patch); err != nil {
		return 0, fmt.Errorf("patch MemberCluster %s status: %w", name, err)
	}
	if changed {
		eventType := corev1.EventTypeNormal
		if !obs.ready {
			eventType = corev1.EventTypeWarning
		}
		p.recorder.Eventf(owner, nil, eventType, obs.reason, "Probe", "%s", cond.Message)
	}
	return refreshIn, nil
}

// memberCluster returns the MemberCluster of owner, the registering object,
// from the hub's cache; when there is none, it creates it (owned by owner)
// if create is set, else it returns nil.
func (p *Provider) memberCluster(ctx context.Context, owner client.Object, create bool) (*v1alpha1.MemberCluster, error) {
	name := owner.GetName()
	mc := &v1alpha1.MemberCluster{}
	err := p.hub.Get(ctx, client.ObjectKeyFromObject(owner), mc)
	switch {
	case apierrors.IsNotFound(err) && create:
		mc = &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: owner.GetNamespace()}}
		if err := controllerutil.SetControllerReference(owner, mc, p.hub.Scheme()); err != nil {
			return nil, fmt.Errorf("own MemberCluster %s: %w", name, err)
		}
		if err := p.hub.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create MemberCluster %s: %w", name, err)
		}
		return mc, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get MemberCluster %s: %w", name, err)
	}
	if !controlledBy(mc, owner) {
		return p.reown(ctx, owner, mc)
	}
	return mc, nil
}

// reown makes owner, the registration this replica serves the member for,
// the controller of mc, which another registration of the same name left
// behind (one of another source that lost the name or went, or a Secret
// deleted and created again): otherwise the MemberCluster would go with
// that one. Its status, which describes the other registration's member,
// is cleared. The patch fails if mc changed since it was read.
func (p *Provider) reown(ctx context.Context, owner client.Object, mc *v1alpha1.MemberCluster) (*v1alpha1.MemberCluster, error) {
	// The status first: in between, the MemberCluster shows its old owner
	// and no status, never the new owner with the old one's status.
	statusPatch := client.MergeFromWithOptions(mc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	mc.Status = v1alpha1.MemberClusterStatus{}
	if err := p.hub.Status().Patch(ctx, mc, statusPatch); err != nil {
		return nil, fmt.Errorf("clear the status of MemberCluster %s: %w", mc.Name, err)
	}
	patch := client.MergeFromWithOptions(mc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	mc.OwnerReferences = slices.DeleteFunc(mc.OwnerReferences, func(ref metav1.OwnerReference) bool {
		return ptr.Deref(ref.Controller, false)
	})
	if err := controllerutil.SetControllerReference(owner, mc, p.hub.Scheme()); err != nil {
		return nil, fmt.Errorf("own MemberCluster %s: %w", mc.Name, err)
	}
	if err := p.hub.Patch(ctx, mc, patch); err != nil {
		return nil, fmt.Errorf("own MemberCluster %s: %w", mc.Name, err)
	}
	return mc, nil
}

// setNameConflict shows on the MemberCluster of the member called name
// whether another registration claims that name too and waits for it.
func (p *Provider) setNameConflict(status *v1alpha1.MemberClusterStatus, name string) {
	loser, ok := p.registry.conflict(multicluster.ClusterName(name))
	if !ok {
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberNameConflict)
		return
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.MemberNameConflict, Status: metav1.ConditionTrue,
		Reason: v1alpha1.MemberNameConflictReason, Message: loser.String() + " registers a member of the same name; this registration keeps it"})
}

// stalledReasons are the Ready reasons of a member that cannot be engaged,
// or its Widgets reconciled, without a change by a user.
var stalledReasons = map[string]bool{
	v1alpha1.MemberInvalidKubeconfigReason: true,
	v1alpha1.MemberExecPluginRefusedReason: true,
	v1alpha1.MemberUnsafeKubeconfigReason:  true,
	v1alpha1.MemberUnauthorizedReason:      true,
	v1alpha1.MemberForbiddenReason:         true,
	v1alpha1.MemberWidgetCRDMissingReason:  true,
	v1alpha1.MemberDegradedReason:          true,
	v1alpha1.MemberNoAccessProviderReason:  true,
	v1alpha1.MemberResponseTooLargeReason:  true,
	v1alpha1.MemberRedirectRefusedReason:   true,
	v1alpha1.MemberTooManyObjectsReason:    true,
}

// setProgress sets the kstatus conditions of a member whose Ready condition
// has status ready and reason: none once it is ready, Stalled for a reason
// only a user can fix, Reconciling (the hub keeps trying) for the others.
func setProgress(conditions *[]metav1.Condition, ready bool, reason, message string) {
	progress, other := v1alpha1.MemberReconciling, v1alpha1.MemberStalled
	switch {
	case ready:
		meta.RemoveStatusCondition(conditions, v1alpha1.MemberReconciling)
		meta.RemoveStatusCondition(conditions, v1alpha1.MemberStalled)
		return
	case stalledReasons[reason]:
		progress, other = other, progress
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: progress, Status: metav1.ConditionTrue, Reason: reason, Message: message})
	meta.RemoveStatusCondition(conditions, other)
}

// recordEngaging shows that the hub is engaging the member of the
// registering object owner with a registration it has not engaged before
// (replacing: it replaces the one of an engaged or parked member):
// Reconciling with reason Engaging, Ready as it was. It writes nothing when
// the MemberCluster shows the outcome of an earlier attempt with this
// registration, so that retrying a member that is unreachable or lacks the
// Widget CRD costs no extra write. It returns the MemberCluster as written,
// nil when it wrote nothing. Best effort: the outcome of the engagement is
// written in any case.
func (p *Provider) recordEngaging(ctx context.Context, owner client.Object, replacing bool, log logr.Logger) *v1alpha1.MemberCluster {
	mc, err := p.memberCluster(ctx, owner, false)
	if err == nil && mc != nil && !replacing && !firstAttempt(mc) {
		return nil
	}
	if err == nil && mc == nil {
		mc, err = p.memberCluster(ctx, owner, true)
	}
	if err == nil {
		patch := client.MergeFrom(mc.DeepCopy())
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: v1alpha1.MemberReconciling, Status: metav1.ConditionTrue,
			Reason: v1alpha1.MemberEngagingReason, Message: "checking the member and starting its caches"})
		meta.RemoveStatusCondition(&mc.Status.Conditions, v1alpha1.MemberStalled)
		p.ownership.report(&mc.Status, owner.GetName())
		if err = p.hub.Status().Patch(ctx, mc, patch); err == nil {
			return mc
		}
		err = fmt.Errorf("patch MemberCluster %s status: %w", owner.GetName(), err)
	}
	log.Info("Cannot show the engagement in the MemberCluster", "error", err.Error())
	return nil
}

// firstAttempt tells whether mc shows no attempt to engage its member yet,
// or only attempts whose kubeconfig could not be used at all: those end
// without a retry, so the next attempt is with a changed Secret.
func firstAttempt(mc *v1alpha1.MemberCluster) bool {
	ready := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady)
	if ready == nil {
		return true
	}
	switch ready.Reason {
	case v1alpha1.MemberInvalidKubeconfigReason, v1alpha1.MemberExecPluginRefusedReason, v1alpha1.MemberUnsafeKubeconfigReason,
		v1alpha1.MemberNoAccessProviderReason:
		return true
	}
	return false
}

// readyDiffers tells whether mc's Ready condition differs from cond in status or reason.
func readyDiffers(mc *v1alpha1.MemberCluster, cond metav1.Condition) bool {
	before := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady)
	return before == nil || before.Status != cond.Status || before.Reason != cond.Reason
}
