package clusters_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// silentMember is a TLS server that accepts every request and never answers
// it until the test ends: a frozen API server, a network partition after
// the handshake.
func silentMember(t *testing.T) (kubeconfig []byte, watches chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	watches = make(chan struct{}, 16)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			watches <- struct{}{}
		}
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["m"] = &clientcmdapi.Cluster{Server: srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	cfg.AuthInfos["m"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "m"}
	cfg.CurrentContext = "m"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data, watches
}

// Every request to a member but a watch ends by the request timeout, however
// long the caller is willing to wait; a watch stays open.
func TestMemberRequestsHaveADeadline(t *testing.T) {
	data, watches := silentMember(t)
	const timeout = 300 * time.Millisecond
	cfg, err := connect.RESTConfig(data, connect.ConfigOptions{RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	member, err := clusters.New("silent", cfg, clusters.MemberOptions{Scheme: clusters.NewScheme(), Logger: ctrl.Log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Stop)

	// The caller would wait 15 s: the member's own deadline must end it first.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	_, err = member.Version(ctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Version on a silent member: %v, want a deadline error", err)
	}
	if took < timeout || took > 10*timeout {
		t.Fatalf("Version gave up after %s, want about %s", took, timeout)
	}
	if err := member.GetAPIReader().Get(ctx, client.ObjectKey{Name: "x"}, &corev1.Namespace{}); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("Get on a silent member: %v, want a deadline error", err)
	}

	// A watch outlives the request timeout.
	watchCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() {
		cfg := rest.CopyConfig(member.GetConfig())
		cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
		rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, member.GetHTTPClient())
		if err != nil {
			result <- err
			return
		}
		body, err := rc.Get().AbsPath("/api/v1/namespaces").Param("watch", "true").Stream(watchCtx)
		if err == nil {
			_, err = io.Copy(io.Discard, body)
		}
		result <- err
	}()
	select {
	case <-watches:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch never reached the member")
	}
	select {
	case err := <-result:
		t.Fatalf("the watch ended after the request timeout: %v", err)
	case <-time.After(5 * timeout):
	}
}

// A member's cache holds only the objects its CacheByObject selects: a member
// with many unrelated Deployments costs the hub nothing for them.
func TestMemberCacheHoldsOnlySelectedObjects(t *testing.T) {
	cp := startMember(t)
	ctx := context.Background()
	const ns, unrelated = "crowded", 40
	if err := fleet.EnsureNamespace(ctx, cp.Client, ns); err != nil {
		t.Fatal(err)
	}
	selected := map[string]string{"app.kubernetes.io/managed-by": "widgethub"}
	for i := range unrelated + 1 {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d-%03d", i)},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"d": fmt.Sprint(i)}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"d": fmt.Sprint(i)}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
				},
			},
		}
		if i == unrelated {
			d.Labels = selected
		}
		if err := cp.Client.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := connect.RESTConfig(cp.Kubeconfig, connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member, err := clusters.New("crowded", cfg, clusters.MemberOptions{
		Scheme: clusters.NewScheme(), Logger: ctrl.Log,
		CacheByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: labels.SelectorFromSet(selected)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := member.StartAndSync(ctx, 30*time.Second, &appsv1.Deployment{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Stop)
	if !member.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the member's cache did not sync")
	}
	list := &appsv1.DeploymentList{}
	if err := member.GetClient().List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != fmt.Sprintf("d-%03d", unrelated) {
		t.Fatalf("the member's cache holds %d Deployments, want only the selected one", len(list.Items))
	}
}
