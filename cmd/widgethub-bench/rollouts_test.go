package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRolloutTrackerFindsTheChangeAfterItsPatch(t *testing.T) {
	tr := &rolloutTracker{seen: map[string][]replicasSeen{}}
	seen := func(name string, replicas int32) time.Time {
		tr.record(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}})
		s := tr.seen[name]
		return s[len(s)-1].at
	}
	first := seen("a", 1)
	time.Sleep(time.Millisecond)
	second := seen("a", 2)
	seen("a", 2) // a write of something else: not a change of replicas
	time.Sleep(time.Millisecond)
	third := seen("a", 1)
	seen("b", 2)

	if n := len(tr.seen["a"]); n != 3 {
		t.Fatalf("recorded %d changes of a, want 3: %v", n, tr.seen["a"])
	}
	for _, tc := range []struct {
		replicas int32
		since    time.Time
		want     time.Time
	}{
		{1, first, first},
		{1, first.Add(time.Nanosecond), third},
		{2, first, second},
		{2, second.Add(time.Nanosecond), time.Time{}},
	} {
		got, ok := tr.seenAt("a", tc.replicas, tc.since)
		if got != tc.want || ok == tc.want.IsZero() {
			t.Errorf("seenAt(a, %d, %s) = %s, %t; want %s", tc.replicas, tc.since, got, ok, tc.want)
		}
	}
	if _, ok := tr.seenAt("c", 1, first); ok {
		t.Error("seenAt found a Deployment never seen")
	}
}
