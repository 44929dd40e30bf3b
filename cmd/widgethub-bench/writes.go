package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// writeCounts are counts of write requests an API server served.
type writeCounts struct {
	// controller counts the writes a Widget controller makes: Deployments and
	// Widget status. Widgets themselves are written by users (and by the
	// benchmark), so they are not counted; nor are Events, which are best effort.
	controller int64
	// all counts every write, whoever made it.
	all int64
}

// sub is w minus v.
func (w writeCounts) sub(v writeCounts) writeCounts {
	return writeCounts{controller: w.controller - v.controller, all: w.all - v.all}
}

// count returns the writes so far.
func (w *writeCounter) count(ctx context.Context) (writeCounts, error) {
	raw, err := w.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return writeCounts{}, fmt.Errorf("read API server metrics: %w", err)
	}
	return countWrites(raw)
}

// countWrites sums apiserver_request_total over the write verbs.
func countWrites(metrics []byte) (writeCounts, error) {
	const name = "apiserver_request_total{"
	var total writeCounts
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(line[len(name):end], -1) {
			labels[m[1]] = m[2]
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return writeCounts{}, fmt.Errorf("parse %q: %w", line, err)
		}
		total.all += int64(v)
		deployments := labels["group"] == "apps" && labels["resource"] == "deployments" && labels["subresource"] == ""
		widgetStatus := labels["resource"] == "widgets" && labels["subresource"] == "status"
		if deployments || widgetStatus {
			total.controller += int64(v)
		}
	}
	return total, sc.Err()
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
