package kubeconfig

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// probeRefresh is how stale status.lastProbeTime may get before it is
// rewritten although nothing else changed: probes run far more often than
// that, and a write per probe would load the hub for no news.
const probeRefresh = time.Minute

// recordStatus writes what obs saw into the MemberCluster owned by secret,
// records a hub Event on the Secret when Ready changes, and sets the metrics.
func (p *Provider) recordStatus(ctx context.Context, secret *corev1.Secret, obs observation) error {
	name := secret.Name
	ready := 0.0
	if obs.ready {
		ready = 1
	}
	clusters.MemberReady.WithLabelValues(name).Set(ready)
	if obs.widgets >= 0 {
		clusters.MemberWidgets.WithLabelValues(name).Set(float64(obs.widgets))
	}

	mc := &v1alpha1.MemberCluster{}
	err := p.hub.Get(ctx, client.ObjectKeyFromObject(secret), mc)
	if apierrors.IsNotFound(err) {
		mc = &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: secret.Namespace}}
		if err := controllerutil.SetControllerReference(secret, mc, p.hub.Scheme()); err != nil {
			return fmt.Errorf("own MemberCluster %s: %w", name, err)
		}
		if err := p.hub.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create MemberCluster %s: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("get MemberCluster %s: %w", name, err)
	}

	status := *mc.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.MemberReady, Status: metav1.ConditionFalse, Reason: obs.reason,
		Message: v1alpha1.TruncateMessage(obs.message)}
	if obs.ready {
		cond.Status = metav1.ConditionTrue
	}
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
		status.KubernetesVersion = obs.version
	}
	if obs.widgets >= 0 {
		status.Widgets = obs.widgets
	}
	setTokenExpiry(&status, obs.tokenExpiry, time.Now())
	status.ServedBy = p.servedBy()
	now := metav1.Now()
	lastProbe := status.LastProbeTime
	fresh := lastProbe != nil && now.Sub(lastProbe.Time) < probeRefresh
	if equality.Semantic.DeepEqual(mc.Status, status) && fresh {
		return nil
	}
	status.LastProbeTime = &now
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Status = status
	if err := p.hub.Status().Patch(ctx, mc, patch); err != nil {
		return fmt.Errorf("patch MemberCluster %s status: %w", name, err)
	}
	if changed {
		eventType := corev1.EventTypeNormal
		if !obs.ready {
			eventType = corev1.EventTypeWarning
		}
		p.recorder.Eventf(secret, nil, eventType, obs.reason, "Probe", "%s", cond.Message)
	}
	return nil
}

// readyDiffers tells whether mc's Ready condition differs from cond in status or reason.
func readyDiffers(mc *v1alpha1.MemberCluster, cond metav1.Condition) bool {
	before := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady)
	return before == nil || before.Status != cond.Status || before.Reason != cond.Reason
}

// setTokenExpiry records when the registration's token expires and whether
// that is within v1alpha1.TokenExpiryWarning of now.
func setTokenExpiry(status *v1alpha1.MemberClusterStatus, expiry, now time.Time) {
	if expiry.IsZero() {
		status.TokenExpiry = nil
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberTokenExpiring)
		return
	}
	status.TokenExpiry = &metav1.Time{Time: expiry}
	cond := metav1.Condition{Type: v1alpha1.MemberTokenExpiring, Status: metav1.ConditionFalse, Reason: v1alpha1.MemberTokenValidReason,
		Message: "the token expires at " + expiry.UTC().Format(time.RFC3339)}
	switch left := expiry.Sub(now); {
	case left <= 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberTokenExpiresSoonReason
		cond.Message = "the token expired at " + expiry.UTC().Format(time.RFC3339) + "; renew it with kubectl widgethub join --overwrite"
	case left < v1alpha1.TokenExpiryWarning:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberTokenExpiresSoonReason
		cond.Message += "; renew it with kubectl widgethub join --overwrite"
	}
	meta.SetStatusCondition(&status.Conditions, cond)
}
