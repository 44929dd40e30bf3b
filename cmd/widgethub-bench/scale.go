package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// scale measures one widgethub manager without sharding serving each of
// scaleMembers registrations (each its own user, over scaleServers API
// servers holding scaleWidgets Widgets each): the time from the Secrets to
// all engaged, the heap and RSS once idle, and how fresh the probes keep
// the members' lastProbeTime; then fits the cost per member.
func (b *benchmark) scale(ctx context.Context, impls []string) error {
	if !slices.Contains(impls, widgethub) {
		return nil
	}
	const ns = "scale"
	if err := b.ensureMembers(b.scaleServers); err != nil {
		return err
	}
	servers := b.members[:b.scaleServers]
	defer func() {
		for _, m := range servers {
			if err := deleteWidgets(ctx, m.client, ns); err != nil {
				logf("clean up: %v", err)
			}
		}
	}()
	for _, m := range servers {
		if err := fleet.CreateWidgets(ctx, m.client, ns, "s", b.scaleWidgets, b.writers); err != nil {
			return err
		}
	}
	if b.scaleUsers == nil {
		var err error
		if b.scaleUsers, b.scaleKubeconfigs, err = userRegistrations(servers, "scale", slices.Max(b.scaleMembers)); err != nil {
			return err
		}
	}
	var texts []string
	var heap, rss, engaged []point
	for _, n := range b.scaleMembers {
		res, err := b.serve(ctx, 0, b.scaleUsers[:n], b.scaleKubeconfigs[:n], b.probeFreshAfter)
		if err != nil {
			return err
		}
		logf("scale, %d members: %s; oldest lastProbeTime %s", n, res, formatDuration(res.oldestProbe))
		text := res.String()
		if res.oldestProbe > 0 {
			text += fmt.Sprintf(", oldest lastProbeTime %s old %s after all engaged", formatDuration(res.oldestProbe), formatDuration(b.probeFreshAfter))
		}
		texts = append(texts, text)
		heap = append(heap, point{0, float64(res.heap0[0])}, point{float64(n), float64(res.heap[0])})
		rss = append(rss, point{0, float64(res.rss0[0])}, point{float64(n), float64(res.rss[0])})
		engaged = append(engaged, point{float64(n), res.engaged.Seconds()})
	}
	heapBase, heapPer := fitLine(heap)
	rssBase, rssPer := fitLine(rss)
	_, engagePer := fitLine(engaged)
	fit := fmt.Sprintf("fit: heap %s + %.0f KiB per member; RSS %s + %.0f KiB per member; engagement %.1f ms per member",
		mib(heapBase), heapPer/1024, mib(rssBase), rssPer/1024, 1000*engagePer)
	b.table.add(rowScale, widgethub, strings.Join(texts, "; ")+"; "+fit, bytesKey(heapPer), true)
	return nil
}

// point is one measurement of a cost y at x members.
type point struct{ x, y float64 }

// fitLine is the least-squares line y = base + perX·x through points.
func fitLine(points []point) (base, perX float64) {
	var sx, sy, sxx, sxy float64
	for _, p := range points {
		sx, sy, sxx, sxy = sx+p.x, sy+p.y, sxx+p.x*p.x, sxy+p.x*p.y
	}
	n := float64(len(points))
	if d := n*sxx - sx*sx; d != 0 {
		perX = (n*sxy - sx*sy) / d
	}
	return (sy - perX*sx) / n, perX
}

// oldestProbe is the age of the oldest status.lastProbeTime among the
// MemberClusters of names; a member never probed counts as an error.
func (b *benchmark) oldestProbe(ctx context.Context, names []string) (time.Duration, error) {
	list := &v1alpha1.MemberClusterList{}
	if err := b.hub.List(ctx, list, client.InNamespace(b.opts.RegistrationNamespace)); err != nil {
		return 0, err
	}
	now := time.Now()
	var oldest time.Duration
	seen := 0
	for _, mc := range list.Items {
		if !slices.Contains(names, mc.Name) {
			continue
		}
		if mc.Status.LastProbeTime == nil {
			return 0, fmt.Errorf("member %s has no lastProbeTime", mc.Name)
		}
		seen++
		oldest = max(oldest, now.Sub(mc.Status.LastProbeTime.Time))
	}
	if seen != len(names) {
		return 0, fmt.Errorf("%d of %d members have a MemberCluster", seen, len(names))
	}
	return oldest, nil
}
