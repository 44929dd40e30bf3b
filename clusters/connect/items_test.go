package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// deploymentList is a list of n Deployments, each with a container and a
// condition (arrays inside an item, which are not items), and a continue
// token, as an API server sends it.
func deploymentList(n int) *appsv1.DeploymentList {
	l := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next"}}
	for i := range n {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("d", i), Namespace: "shop", Labels: map[string]string{"items": "x"}}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "widget", Image: "pause"}}
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: "True"}}
		l.Items = append(l.Items, d)
	}
	return l
}

func protobufOf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// countIn counts data's items in pieces of 1 to 7 bytes, as a network hands
// them over.
func countIn(t *testing.T, c interface{ count([]byte) (int64, error) }, data []byte) (int64, error) {
	t.Helper()
	r := &oneByteAtATime{data: data}
	buf := make([]byte, 7)
	var items int64
	for {
		n, err := r.Read(buf)
		got, cerr := c.count(buf[:n])
		items = got
		if cerr != nil {
			return items, cerr
		}
		if err == io.EOF {
			return items, nil
		}
	}
}

// Both counters count a list's own items, in JSON and in an API server's
// protobuf, whatever the items hold, and a single object as at most one.
func TestListItemsAreCounted(t *testing.T) {
	for _, n := range []int{0, 1, 3, 500} {
		l := deploymentList(n)
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := countIn(t, &jsonItems{}, raw); got != int64(n) || err != nil {
			t.Errorf("JSON list of %d: counted %d, %v", n, got, err)
		}
		if got, err := countIn(t, &protoItems{}, protobufOf(t, l)); got != int64(n) || err != nil {
			t.Errorf("protobuf list of %d: counted %d, %v", n, got, err)
		}
	}
	one := &deploymentList(1).Items[0]
	one.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	raw, _ := json.Marshal(one)
	if got, _ := countIn(t, &jsonItems{}, raw); got != 0 {
		t.Errorf("a JSON Deployment counted as %d items", got)
	}
	if got, _ := countIn(t, &protoItems{}, protobufOf(t, one)); got > 1 {
		t.Errorf("a protobuf Deployment counted as %d items", got)
	}
}

// What a hostile member sends in place of a list: empty items, nulls, the
// key spelt so that a decoder still takes it, and protobuf that is not an
// API server's.
func TestHostileListItemsAreCounted(t *testing.T) {
	empties := func(key, item string, n int) []byte { return []byte(listOf(key, item, n)) }
	for _, tc := range []struct {
		name string
		data []byte
		want int64
	}{
		{"empty objects", empties("items", "{}", 1000), 1000},
		{"nulls", empties("items", "null", 1000), 1000},
		{"the key in capitals", empties("ITEMS", "{}", 10), 10},
		{"the key escaped", empties(`\u0069tems`, "{}", 10), 10},
		{"items twice", []byte(`{"items":[{}],"items":[{},{}]}`), 3},
		{"braces in strings", []byte(`{"items":[{"a":"}],\"items\":["},{"b":"]"}]}`), 2},
		{"another key's array", empties("groups", "{}", 10), 0},
	} {
		if got, err := countIn(t, &jsonItems{}, tc.data); got != tc.want || err != nil {
			t.Errorf("%s: counted %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	// 1,000 empty items in protobuf: field 2 of raw, each 2 bytes.
	raw := bytes.Repeat([]byte{0x12, 0x00}, 1000)
	msg := append([]byte(protobufMagic), 0x12)
	msg = appendVarint(msg, uint64(len(raw)))
	msg = append(msg, raw...)
	if got, err := countIn(t, &protoItems{}, msg); got != 1000 || err != nil {
		t.Errorf("protobuf of 1,000 empty items: counted %d, %v", got, err)
	}
	for name, data := range map[string][]byte{
		"no prefix": []byte("{}"),
		"a group":   append([]byte(protobufMagic), 0x0b),
	} {
		if _, err := countIn(t, &protoItems{}, data); err == nil {
			t.Errorf("protobuf %s: counted, want errNotCountable", name)
		}
	}
}

// listOf is a JSON list whose key holds n copies of item.
func listOf(key, item string, n int) string {
	return `{"kind":"WidgetList","metadata":{"continue":"x"},"` + key + `":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// The guard fails an answer with more items than the request's limit
// (unless resourceVersion=0, which the watch cache may serve whole), or
// than MaxListItems, and refuses YAML, whose items it does not count.
func TestGuardBoundsListItems(t *testing.T) {
	body := func(n int) string { return listOf("items", "{}", n) }
	for _, tc := range []struct {
		query, contentType, body string
		refused                  bool
	}{
		{"limit=1", "application/json", body(1), false},
		{"limit=1", "application/json", body(2), true},
		{"limit=500&continue=x", "application/json", body(500), false},
		{"limit=500&continue=x", "application/json", body(501), true},
		{"limit=500&resourceVersion=0", "application/json", body(1000), false},
		{"", "application/json", body(MaxListItems + 1), true},
		{"", "application/yaml", "items: []", true},
		{"", "text/plain", "ok", false},
	} {
		g := &answerGuard{maxBytes: 64 << 20, next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			h := http.Header{"Content-Type": {tc.contentType}}
			return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(tc.body)), Request: req}, nil
		})}
		req, _ := http.NewRequest(http.MethodGet, "https://member.example/apis/widgethub.io/v1alpha1/widgets?"+tc.query, nil)
		var err error
		if resp, rerr := g.RoundTrip(req); rerr != nil {
			err = rerr
		} else {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		if refused := errors.Is(err, ErrResponseTooLarge); refused != tc.refused {
			t.Errorf("%q, %s, %d bytes: err %v, want refused=%v", tc.query, tc.contentType, len(tc.body), err, tc.refused)
		}
	}
}

// A paged list whose pages each hold their 500 items counts them together:
// past MaxListItems the page that passes it fails.
func TestGuardBoundsAPagedListsItemsTogether(t *testing.T) {
	page := listOf("items", "{}", 500)
	g := &answerGuard{maxBytes: 64 << 20, next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		h := http.Header{"Content-Type": {"application/json"}}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(page)), Request: req}, nil
	})}
	for i := 1; i <= MaxListItems/500+1; i++ {
		query := "limit=500"
		if i > 1 {
			query += "&continue=x"
		}
		req, _ := http.NewRequest(http.MethodGet, "https://member.example/apis/widgethub.io/v1alpha1/widgets?"+query, nil)
		resp, err := g.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case err == nil && i*500 > MaxListItems:
			t.Fatalf("page %d read: %d items in all, past MaxListItems", i, i*500)
		case err != nil && i*500 <= MaxListItems:
			t.Fatalf("page %d refused at %d items in all: %v", i, i*500, err)
		case err != nil:
			if !errors.Is(err, ErrResponseTooLarge) {
				t.Fatalf("page %d: %v, want ErrResponseTooLarge", i, err)
			}
			return
		}
	}
	t.Fatalf("%d items in %d pages all read", (MaxListItems/500+1)*500, MaxListItems/500+1)
}
