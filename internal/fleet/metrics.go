package fleet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// RequestCount is one series of an API server's apiserver_request_total.
type RequestCount struct {
	Labels map[string]string
	Count  float64
}

// RequestCounts reads apiserver_request_total from the API server at cfg,
// whose user must be allowed to read /metrics.
func RequestCounts(ctx context.Context, cfg *rest.Config) ([]RequestCount, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read API server metrics: %w", err)
	}
	return ParseRequestCounts(raw)
}

// SumRequests adds up the counts of the series for which match is true.
func SumRequests(counts []RequestCount, match func(labels map[string]string) bool) float64 {
	var sum float64
	for _, c := range counts {
		if match(c.Labels) {
			sum += c.Count
		}
	}
	return sum
}

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ParseRequestCounts returns the apiserver_request_total series of a
// Prometheus text exposition.
func ParseRequestCounts(metrics []byte) ([]RequestCount, error) {
	const name = "apiserver_request_total{"
	var counts []RequestCount
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
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", line, err)
		}
		counts = append(counts, RequestCount{Labels: labels, Count: v})
	}
	return counts, sc.Err()
}
