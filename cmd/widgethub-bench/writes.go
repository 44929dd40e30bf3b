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

// WriteCounter reads an API server's count of writes from its own metrics.
type WriteCounter struct {
	rest rest.Interface
}

// NewWriteCounter returns a WriteCounter of the API server at cfg; cfg's user
// must be allowed to read /metrics.
func NewWriteCounter(cfg *rest.Config) (*WriteCounter, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	return &WriteCounter{rest: cs.Discovery().RESTClient()}, nil
}

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// Writes are counts of write requests an API server served.
type Writes struct {
	// Controller counts the writes a Widget controller makes: Deployments and
	// Widget status. Widgets themselves are written by users (and by the
	// benchmark), so they are not counted; nor are Events, which are best effort.
	Controller int64
	// All counts every write, whoever made it.
	All int64
}

// Sub is w minus v.
func (w Writes) Sub(v Writes) Writes {
	return Writes{Controller: w.Controller - v.Controller, All: w.All - v.All}
}

// Count returns the writes so far.
func (w *WriteCounter) Count(ctx context.Context) (Writes, error) {
	raw, err := w.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Writes{}, fmt.Errorf("read API server metrics: %w", err)
	}
	return countWrites(raw)
}

// countWrites sums apiserver_request_total over the write verbs.
func countWrites(metrics []byte) (Writes, error) {
	const name = "apiserver_request_total{"
	var total Writes
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
			return Writes{}, fmt.Errorf("parse %q: %w", line, err)
		}
		total.All += int64(v)
		deployments := labels["group"] == "apps" && labels["resource"] == "deployments" && labels["subresource"] == ""
		widgetStatus := labels["resource"] == "widgets" && labels["subresource"] == "status"
		if deployments || widgetStatus {
			total.Controller += int64(v)
		}
	}
	return total, sc.Err()
}

// APIServerProfile returns a CPU profile of the API server at cfg over d, in
// pprof's format; cfg's user must be allowed to read /debug/pprof.
func APIServerProfile(ctx context.Context, cfg *rest.Config, d time.Duration) ([]byte, error) {
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
