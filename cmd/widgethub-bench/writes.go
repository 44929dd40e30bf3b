package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/widgethub/widgethub/internal/fleet"
)

// writeCounter reads an API server's count of writes from its own metrics.
type writeCounter struct {
	rest rest.Interface
}

// newWriteCounter returns a writeCounter of the API server at cfg; cfg's user
// must be allowed to read /metrics.
func newWriteCounter(cfg *rest.Config) (*writeCounter, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	return &writeCounter{rest: cs.Discovery().RESTClient()}, nil
}

// writeCounts are counts of write requests an API server served.
type writeCounts struct {
	// controller counts the writes a Widget controller makes: Deployments and
	// Widget status. Widgets themselves are written by users (and by the
	// benchmark), so they are not counted; nor are Events, which are best effort.
	controller int64
	// all counts every write, whoever made it.
	all int64
	// lists and gets count the reads beside them, whoever made them.
	lists, gets int64
}

// sub is w minus v.
func (w writeCounts) sub(v writeCounts) writeCounts {
	return writeCounts{controller: w.controller - v.controller, all: w.all - v.all, lists: w.lists - v.lists, gets: w.gets - v.gets}
}

func (w writeCounts) add(v writeCounts) writeCounts {
	return writeCounts{controller: w.controller + v.controller, all: w.all + v.all, lists: w.lists + v.lists, gets: w.gets + v.gets}
}

// count returns the writes so far.
func (w *writeCounter) count(ctx context.Context) (writeCounts, error) {
	raw, err := w.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return writeCounts{}, fmt.Errorf("read API server metrics: %w", err)
	}
	return countWrites(raw)
}

// countMemberWrites sums the writes so far over members.
func countMemberWrites(ctx context.Context, members []member) (writeCounts, error) {
	var total writeCounts
	for _, m := range members {
		n, err := m.writes.count(ctx)
		if err != nil {
			return total, err
		}
		total = total.add(n)
	}
	return total, nil
}

// countWrites sums apiserver_request_total over the write verbs, and over
// LIST and GET.
func countWrites(metrics []byte) (writeCounts, error) {
	counts, err := fleet.ParseRequestCounts(metrics)
	if err != nil {
		return writeCounts{}, err
	}
	var total writeCounts
	for _, c := range counts {
		switch c.Labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		case "LIST":
			total.lists += int64(c.Count)
			continue
		case "GET":
			total.gets += int64(c.Count)
			continue
		default:
			continue
		}
		total.all += int64(c.Count)
		deployments := c.Labels["group"] == "apps" && c.Labels["resource"] == "deployments" && c.Labels["subresource"] == ""
		widgetStatus := c.Labels["resource"] == "widgets" && c.Labels["subresource"] == "status"
		if deployments || widgetStatus {
			total.controller += int64(c.Count)
		}
	}
	return total, nil
}

// apiServerProfile returns a CPU profile of the API server at cfg over d, in
// pprof's format; cfg's user must be allowed to read /debug/pprof.
func apiServerProfile(ctx context.Context, cfg *rest.Config, d time.Duration) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("profile client: %w", err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read API server profile: %w", err)
	}
	return raw, nil
}
