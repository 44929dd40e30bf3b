package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// EndlessWatch streams watch events of new objects, each of its own name,
// UID and resourceVersion, and stops once the client goes away.
func TestEndlessWatchStreamsNewObjectsUntilTheClientLeaves(t *testing.T) {
	done := make(chan struct{})
	h := EndlessWatch("widgethub.io/v1alpha1", "Widget", "flood")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // on a failure too, so that srv.Close does not wait for the stream
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/apis/widgethub.io/v1alpha1/widgets?watch=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	names, uids, versions := map[string]bool{}, map[string]bool{}, map[string]bool{}
	const n = 5000 // more than the first write holds
	for range n {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				APIVersion, Kind string
				Metadata         struct{ Namespace, Name, UID, ResourceVersion string }
			} `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		m := ev.Object.Metadata
		if ev.Type != "ADDED" || ev.Object.Kind != "Widget" || ev.Object.APIVersion != "widgethub.io/v1alpha1" || m.Namespace != "flood" {
			t.Fatalf("event %+v", ev)
		}
		names[m.Name], uids[m.UID], versions[m.ResourceVersion] = true, true, true
	}
	if len(names) != n || len(uids) != n || len(versions) != n {
		t.Fatalf("%d events: %d names, %d UIDs, %d resourceVersions, want each new", n, len(names), len(uids), len(versions))
	}
	cancel()
	_ = resp.Body.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream went on after the client left")
	}
}
