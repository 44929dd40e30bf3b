package widget

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	mcsource "sigs.k8s.io/multicluster-runtime/pkg/source"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// Name of the controller, its field manager and its event reporter.
const (
	ControllerName = "widget"
	FieldManager   = "widgethub"
)

// The permissions the hub needs in every member (see config/member-rbac).
// +kubebuilder:rbac:groups=widgethub.io,resources=widgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=widgethub.io,resources=widgets/status,verbs=patch
// +kubebuilder:rbac:groups=widgethub.io,resources=widgets/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ClusterGetter returns an engaged member by name; mcmanager.Manager is one.
type ClusterGetter interface {
	GetCluster(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error)
}

// Reconciler makes each Widget's Deployment match its spec and reports its
// status. It is the Reconciler of the multi-cluster controller (package
// reconcilers/controller) that Sources feed.
type Reconciler struct {
	// Clusters resolves a request's member: the multicluster manager.
	Clusters ClusterGetter
}

// Sources are what the Widget controller watches on every member: its
// Widgets (a change of spec), and the Deployments they control.
func Sources() []mcsource.Source {
	return []mcsource.Source{
		mcsource.Kind[client.Object](&v1alpha1.Widget{}, mchandler.EnqueueRequestForObject, predicate.GenerationChangedPredicate{}),
		mcsource.Kind[client.Object](&appsv1.Deployment{}, mchandler.EnqueueRequestForOwner(&v1alpha1.Widget{}, handler.OnlyControllerOwner())),
	}
}

// Reconcile brings one Widget of one member to its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	cl, err := r.Clusters.GetCluster(ctx, req.ClusterName)
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		ctrl.LoggerFrom(ctx).V(1).Info("Member is no longer engaged; dropping the request")
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get member %q: %w", req.ClusterName, err)
	}
	return r.reconcile(ctx, cl, req)
}

func (r *Reconciler) reconcile(ctx context.Context, cl cluster.Cluster, req mcreconcile.Request) (ctrl.Result, error) {
	c := cl.GetClient()

	widget := &v1alpha1.Widget{}
	if err := c.Get(ctx, req.NamespacedName, widget); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !widget.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the owned Deployment
	}

	deploy := &appsv1.Deployment{}
	if err := c.Get(ctx, req.NamespacedName, deploy); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get Deployment: %w", err)
		}
		deploy = nil
	}

	applied, applyErr := r.applyDeployment(ctx, cl, widget, deploy)
	if err := r.patchStatus(ctx, cl, widget, deploy, applied, applyErr); err != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	return ctrl.Result{}, applyErr
}

// applyDeployment writes the Widget's Deployment when the fields widgethub
// owns differ, and tells whether it did.
func (r *Reconciler) applyDeployment(ctx context.Context, cl cluster.Cluster, w *v1alpha1.Widget, current *appsv1.Deployment) (bool, error) {
	desired := DesiredDeployment(w)
	if current != nil && upToDate(current, desired) {
		return false, nil
	}
	if err := cl.GetClient().Apply(ctx, desired, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply Deployment: %w", err)
	}
	action := "Updated"
	if current == nil {
		action = "Created"
	}
	ctrl.LoggerFrom(ctx).Info(action+" Deployment", "replicas", w.DesiredReplicas(), "image", v1alpha1.TruncateMessage(w.DesiredImage()))
	cl.GetEventRecorder(FieldManager).Eventf(w, nil, corev1.EventTypeNormal, "Deployment"+action, "Apply",
		"%s Deployment %s with %d replicas of %s", action, w.Name, w.DesiredReplicas(), w.DesiredImage())
	return true, nil
}

// patchStatus writes the observed status when it differs from the Widget's.
// The Deployment's watch brings the next reconcile when its rollout moves on,
// so no status needs a requeue.
func (r *Reconciler) patchStatus(ctx context.Context, cl cluster.Cluster, w *v1alpha1.Widget, deploy *appsv1.Deployment, applied bool, applyErr error) error {
	status := observedStatus(w, deploy, applied, applyErr)
	if equality.Semantic.DeepEqual(w.Status, status) {
		return nil
	}
	before := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady)
	wasStalled := meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WidgetStalled)
	patch := client.MergeFrom(w.DeepCopy())
	w.Status = status
	if err := cl.GetClient().Status().Patch(ctx, w, patch); err != nil {
		return fmt.Errorf("patch Widget status: %w", err)
	}
	after := meta.FindStatusCondition(status.Conditions, v1alpha1.WidgetReady)
	// An Event for each change of readiness; a new Widget's first status is
	// no change (its DeploymentCreated Event already says what happened), and
	// sparing that write matters when thousands of Widgets arrive at once.
	readyChanged := (before == nil && after.Status == metav1.ConditionTrue) || (before != nil && before.Status != after.Status)
	if readyChanged {
		eventType := corev1.EventTypeNormal
		if after.Reason == v1alpha1.WidgetDeploymentFailedReason {
			eventType = corev1.EventTypeWarning
		}
		ctrl.LoggerFrom(ctx).Info("Widget readiness changed", "ready", after.Status, "reason", after.Reason)
		cl.GetEventRecorder(FieldManager).Eventf(w, nil, eventType, after.Reason, "Reconcile", "%s", after.Message)
	}
	// A Widget that stalls while Ready says nothing new (its rollout passed
	// its deadline, say) gets a Warning of its own.
	if stalled := meta.FindStatusCondition(status.Conditions, v1alpha1.WidgetStalled); stalled != nil && !wasStalled &&
		!(readyChanged && after.Reason == v1alpha1.WidgetDeploymentFailedReason) {
		ctrl.LoggerFrom(ctx).Info("Widget stalled", "reason", stalled.Reason, "message", stalled.Message)
		cl.GetEventRecorder(FieldManager).Eventf(w, nil, corev1.EventTypeWarning, stalled.Reason, "Reconcile", "%s", stalled.Message)
	}
	return nil
}
