package plugin_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// mintedUntil is the expiry join printed for the token it minted.
func mintedUntil(t *testing.T, r result) string {
	t.Helper()
	m := regexp.MustCompile(`token minted for the hub, bound to Secret \S+, valid until (\S+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("join printed no token expiry:\n%s", r.stdout)
	}
	return m[1]
}

// tokenSecret is the name of the Secret in the member that the token of the
// registration name is bound to, as its annotation says; it checks that the
// Secret exists in cp.
func tokenSecret(t *testing.T, cp *fleet.ControlPlane, name string) string {
	t.Helper()
	bound := registrationSecret(t, name).Annotations[plugin.TokenSecretAnnotation]
	if !strings.HasPrefix(bound, plugin.TokenSecretPrefix) {
		t.Fatalf("registration %s names token Secret %q, want a name starting with %s", name, bound, plugin.TokenSecretPrefix)
	}
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Namespace: plugin.MemberNamespace, Name: bound}, &corev1.Secret{}); err != nil {
		t.Fatalf("token Secret of %s in %s: %v", name, cp.Name, err)
	}
	return bound
}

// expectRevoked waits until c's token is refused (401), which kube-apiserver's
// cache of successful token authentications (10 s) delays, and logs how long
// that took.
func expectRevoked(t *testing.T, c client.Client, what string) {
	t.Helper()
	start := time.Now()
	NewWithT(t).Eventually(func() error {
		return c.List(context.Background(), &v1alpha1.WidgetList{}, client.Limit(1))
	}, 20*time.Second, 100*time.Millisecond).Should(Satisfy(apierrors.IsUnauthorized), what)
	t.Logf("%s: refused (401) after %s", what, time.Since(start).Round(10*time.Millisecond))
}

func expectWorks(t *testing.T, c client.Client, what string) {
	t.Helper()
	if err := c.List(context.Background(), &v1alpha1.WidgetList{}, client.Limit(1)); err != nil {
		t.Errorf("%s: list Widgets: %v", what, err)
	}
}

// The revocation tests wait for kube-apiserver's token cache: they run in
// parallel, one on alpha and one on beta, after the serial tests.

func TestOverwriteRevokesTheReplacedToken(t *testing.T) {
	t.Parallel()
	alpha := testFleet.Member("alpha")
	unjoinCleanup(t, "alpha", "alpha")
	unjoinCleanup(t, "other", "alpha")
	join(t, "alpha", "alpha")
	join(t, "other", "alpha") // a second registration of the same member
	old, _ := registrationClient(t, "alpha")
	other, _ := registrationClient(t, "other")
	oldSecret := tokenSecret(t, alpha, "alpha")

	r := join(t, "alpha", "alpha", "--overwrite")
	if !strings.Contains(r.stdout, "deleted token Secret "+plugin.MemberNamespace+"/"+oldSecret+": its token is revoked") {
		t.Errorf("join --overwrite does not say it revoked the old token:\n%s", r.stdout)
	}
	newSecret := tokenSecret(t, alpha, "alpha")
	if newSecret == oldSecret {
		t.Fatalf("join --overwrite kept token Secret %s", oldSecret)
	}
	err := alpha.Client.Get(context.Background(), client.ObjectKey{Namespace: plugin.MemberNamespace, Name: oldSecret}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the replaced token's Secret after join --overwrite: err = %v, want NotFound", err)
	}
	expectRevoked(t, old, "the replaced token after join --overwrite")
	current, _ := registrationClient(t, "alpha")
	expectWorks(t, current, "the new token")
	expectWorks(t, other, "the other registration's token")
}

// TestTwoHubsShareAMember registers beta with two hubs (two registration
// namespaces of the suite's hub are as good as two hubs: each registration
// has its own token and token Secret). Removing one revokes its token only,
// and its cleanup keeps what the other still needs.
func TestTwoHubsShareAMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	beta := testFleet.Member("beta")
	ensureNamespace(t, testFleet.Hub, "hub-two")
	unjoinCleanup(t, "beta", "beta")
	t.Cleanup(func() {
		mustRun(t, "unjoin", "beta", "--registration-namespace", "hub-two", "--cleanup", "--member-context", "beta")
	})
	join(t, "beta", "beta")
	join(t, "beta", "beta", "--registration-namespace", "hub-two")
	one, _ := registrationClient(t, "beta")
	bound := tokenSecret(t, beta, "beta")
	two := registrationClientIn(t, "hub-two", "beta")

	// Without --cleanup the registration and its token go; what join
	// installed stays.
	r := mustRun(t, "unjoin", "beta", "--member-context", "beta")
	for _, want := range []string{"deleted token Secret " + plugin.MemberNamespace + "/" + bound, "deleted registration Secret widgethub-system/beta"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("unjoin output lacks %q:\n%s", want, r.stdout)
		}
	}
	err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: "beta"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("registration after unjoin: err = %v, want NotFound", err)
	}
	expectRevoked(t, one, "the token of a removed registration")
	expectWorks(t, two, "the other hub's token after the first hub's unjoin")

	// The first hub's cleanup keeps what the second hub uses.
	r = mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
	if want := "other registrations still hold tokens bound to Secrets in " + plugin.MemberNamespace; !strings.Contains(r.stdout, want) ||
		!strings.Contains(r.stdout, "of registration hub-two/beta") {
		t.Errorf("unjoin --cleanup does not say it kept what hub-two/beta uses:\n%s", r.stdout)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: plugin.MemberServiceAccount}}
	if err := beta.Client.Get(ctx, client.ObjectKeyFromObject(sa), sa); err != nil || sa.DeletionTimestamp != nil {
		t.Errorf("the shared ServiceAccount after the first hub's unjoin --cleanup: err = %v", err)
	}
	expectWorks(t, two, "the other hub's token after the first hub's unjoin --cleanup")

	// The last one's cleanup removes everything.
	mustRun(t, "unjoin", "beta", "--registration-namespace", "hub-two", "--cleanup", "--member-context", "beta")
	if err := beta.Client.Get(ctx, client.ObjectKeyFromObject(sa), sa); !apierrors.IsNotFound(err) {
		t.Errorf("the ServiceAccount after the last unjoin --cleanup: err = %v, want NotFound", err)
	}
	expectRevoked(t, two, "the last registration's token after unjoin --cleanup")
}

func TestUnjoinKeepTokenLeavesTheMemberAlone(t *testing.T) {
	ctx := context.Background()
	beta := testFleet.Member("beta")
	unjoinCleanup(t, "beta", "beta")
	joined := join(t, "beta", "beta")
	c, _ := registrationClient(t, "beta")
	bound := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: tokenSecret(t, beta, "beta")}}

	r := mustRun(t, "unjoin", "beta", "--keep-token")
	if want := "stays valid in the member until it expires (" + mintedUntil(t, joined) + ")"; !strings.Contains(r.stdout, want) {
		t.Errorf("unjoin --keep-token output lacks %q:\n%s", want, r.stdout)
	}
	if err := beta.Client.Get(ctx, client.ObjectKeyFromObject(bound), bound); err != nil {
		t.Errorf("the token Secret after unjoin --keep-token: %v", err)
	}
	expectWorks(t, c, "the token after unjoin --keep-token")

	// The kept token holds what it needs in place: cleanup keeps it ...
	r = mustRun(t, "unjoin", "beta", "--cleanup", "--member-context", "beta")
	if !strings.Contains(r.stdout, bound.Name+" of registration widgethub-system/beta") {
		t.Errorf("unjoin --cleanup does not name the kept token's Secret:\n%s", r.stdout)
	}
	expectWorks(t, c, "the kept token after unjoin --cleanup")
	// ... until its Secret is deleted by hand, as the message says.
	if err := beta.Client.Delete(ctx, bound); err != nil {
		t.Fatal(err)
	}
}

// TestRevocationDeletesOnlyTokenSecrets points a registration's annotation
// at Secrets that are not a token's: unjoin must keep them.
func TestRevocationDeletesOnlyTokenSecrets(t *testing.T) {
	ctx := context.Background()
	alpha := testFleet.Member("alpha")
	unjoinCleanup(t, "alpha", "alpha")
	for _, name := range []string{"precious", plugin.TokenSecretPrefix + "lookalike"} {
		join(t, "alpha", "alpha")
		victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: name}}
		if err := alpha.Client.Create(ctx, victim); err != nil {
			t.Fatal(err)
		}
		real := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.MemberNamespace, Name: tokenSecret(t, alpha, "alpha")}}
		s := registrationSecret(t, "alpha")
		s.Annotations[plugin.TokenSecretAnnotation] = name
		if err := testFleet.Hub.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		r := mustRun(t, "unjoin", "alpha", "--member-context", "alpha")
		if !strings.Contains(r.stdout, "kept Secret "+plugin.MemberNamespace+"/"+name) {
			t.Errorf("unjoin does not say it kept %s:\n%s", name, r.stdout)
		}
		if err := alpha.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
			t.Errorf("Secret %s named by a registration's annotation after unjoin: %v", name, err)
		}
		for _, obj := range []client.Object{victim, real} {
			if err := alpha.Client.Delete(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
}
