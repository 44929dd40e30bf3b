package members

import (
	"context"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// RecordEngagedOver writes, as a reconcile of the registration owner does,
// that its member is engaged into the MemberCluster read, which that
// reconcile read earlier (from its cache, say). The provider is a fresh one
// on hub, without sharding.
func RecordEngagedOver(ctx context.Context, hub client.Client, owner client.Object, read *v1alpha1.MemberCluster) error {
	p := New(Options{Scheme: hub.Scheme()})
	p.hub, p.apiReader, p.ownership, p.recorder = hub, hub, everything{}, events.NewFakeRecorder(10)
	_, err := p.recordStatus(ctx, owner, observation{ready: true, reason: v1alpha1.MemberEngagedReason,
		message: "engaged", widgets: unknownWidgets, written: read})
	return err
}
