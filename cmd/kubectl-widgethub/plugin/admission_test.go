package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// unfencedMember is an API server of the test's own, started with flags
// (the fleet's members all enforce ValidatingAdmissionPolicy), with an admin
// client and kubeconfig file.
type unfencedMember struct {
	client     client.Client
	kubeconfig string
}

// startUnfencedMembers starts one API server per flag set, in parallel,
// stopped when t ends.
func startUnfencedMembers(t *testing.T, flags ...map[string]string) []unfencedMember {
	t.Helper()
	members := make([]unfencedMember, len(flags))
	errs := make([]error, len(flags))
	var wg sync.WaitGroup
	for i, f := range flags {
		api := &envtest.APIServer{}
		for k, v := range f {
			api.Configure().Set(k, v)
		}
		env := &envtest.Environment{ControlPlane: envtest.ControlPlane{APIServer: api}, ControlPlaneStartTimeout: 3 * time.Minute}
		path := filepath.Join(t.TempDir(), "member.kubeconfig")
		wg.Go(func() {
			cfg, err := env.Start()
			if err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(func() {
				if err := env.Stop(); err != nil {
					t.Error(err)
				}
			})
			if members[i].client, err = client.New(cfg, client.Options{}); err != nil {
				errs[i] = err
				return
			}
			admin, err := env.AddUser(envtest.User{Name: "member-admin", Groups: []string{"system:masters"}}, nil)
			if err != nil {
				errs[i] = err
				return
			}
			doc, err := admin.KubeConfig()
			if err == nil {
				err = os.WriteFile(path, doc, 0o600)
			}
			members[i].kubeconfig, errs[i] = path, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("start an API server of the test's own: %v", err)
		}
	}
	return members
}

// join fences the hub's identity with a ValidatingAdmissionPolicy: a member
// that does not serve it is refused before anything is written, and one that
// serves it without enforcing it is refused before anything is registered,
// its new token revoked; each says so plainly (exit 1).
func TestJoinNeedsValidatingAdmissionPolicy(t *testing.T) {
	ctx := context.Background()
	members := startUnfencedMembers(t,
		// kube-apiserver v1.36 starts without the API only when its admission
		// plugin is off too (the plugin waits for the API to be served).
		map[string]string{
			"runtime-config":            "admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
			"disable-admission-plugins": "ValidatingAdmissionPolicy",
		},
		map[string]string{"disable-admission-plugins": "ValidatingAdmissionPolicy"},
	)
	unserved, unenforced := members[0], members[1]
	registered := func(name string) bool {
		t.Helper()
		err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: name}, &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	r := run(t, "join", "no-policies", "--member-kubeconfig", unserved.kubeconfig)
	if want := "the member does not serve ValidatingAdmissionPolicy widgethub-member, which join installs to fence the hub's identity " +
		"(ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1, Kubernetes 1.30 and later, served and enforced); join wrote nothing"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("join of a member without ValidatingAdmissionPolicy: want exit 1 and %q, got %s", want, r)
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	for what, err := range map[string]error{
		"the Widget CRD": unserved.client.Get(ctx, client.ObjectKey{Name: plugin.WidgetCRDName}, crd),
		"the namespace " + plugin.MemberNamespace: unserved.client.Get(ctx, client.ObjectKey{Name: plugin.MemberNamespace}, &corev1.Namespace{}),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("join wrote %s in a member without ValidatingAdmissionPolicy: err = %v, want NotFound", what, err)
		}
	}
	if registered("no-policies") {
		t.Error("join registered a member without ValidatingAdmissionPolicy")
	}

	r = run(t, "join", "unenforced", "--member-kubeconfig", unenforced.kubeconfig)
	for _, want := range []string{
		"waiting for the admission policy widgethub-member to refuse the token a Deployment in kube-system: the member admitted a dry run of that Deployment: " +
			"it serves ValidatingAdmissionPolicy but does not enforce it",
		"the new token is revoked, and what join installed in the member stays (unjoin unenforced --cleanup removes it)",
	} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("join of a member that does not enforce ValidatingAdmissionPolicy: want exit 1 and %q, got %s", want, r)
		}
	}
	if registered("unenforced") {
		t.Error("join registered a member that does not enforce ValidatingAdmissionPolicy")
	}
	var tokens corev1.SecretList
	if err := unenforced.client.List(ctx, &tokens, client.InNamespace(plugin.MemberNamespace), client.MatchingLabels{plugin.TokenSecretLabel: "true"}); err != nil || len(tokens.Items) != 0 {
		t.Errorf("token Secrets left in the member (the token is not revoked): %d, err %v", len(tokens.Items), err)
	}
	// What join installed goes as the error says.
	if r := run(t, "unjoin", "unenforced", "--cleanup", "--member-kubeconfig", unenforced.kubeconfig); r.code != 0 {
		t.Errorf("unjoin unenforced --cleanup: %s", r)
	}
	if err := unenforced.client.Get(ctx, client.ObjectKey{Namespace: plugin.MemberNamespace, Name: plugin.MemberServiceAccount}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ServiceAccount after unjoin --cleanup: err = %v, want NotFound", err)
	}
}
