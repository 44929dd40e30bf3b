package plugin_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// join replaces only a registration: a hub Secret of NAME without the label
// widgethub.io/kubeconfig=true (a Helm release's, one labelled "false") is
// left as it is, with --overwrite or without, and join stops before it
// writes anything to the member. The built plugin exits with the same code.
func TestOverwriteReplacesOnlyARegistration(t *testing.T) {
	ctx := context.Background()
	alpha := testFleet.Member("alpha")
	foreign := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "shop-release", Labels: map[string]string{"owner": "helm"}},
			Type:       "helm.sh/release.v1",
			Data:       map[string][]byte{"release": []byte("H4sIAAAAAAAA/release")},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "not-yet", Labels: map[string]string{registration.SecretLabel: "false"}},
			Data:       map[string][]byte{registration.SecretKey: []byte("apiVersion: v1\nkind: Config\n")},
		},
	}
	for _, s := range foreign {
		if err := testFleet.Hub.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(context.Background(), s) })
	}
	tokensBefore := tokenSecretsIn(t, alpha)

	check := func(what string, code int, output string, s *corev1.Secret) {
		t.Helper()
		want := "hub: Secret " + hubNS + "/" + s.Name + " exists and is not a widgethub registration (no label " + registration.SecretLabel + "=true)"
		if code != plugin.ExitConflict || !strings.Contains(output, want) {
			t.Errorf("%s: exit %d, want %d and %q in:\n%s", what, code, plugin.ExitConflict, want, output)
		}
		after := &corev1.Secret{}
		if err := testFleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(s), after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != s.ResourceVersion {
			t.Errorf("%s: Secret %s changed (resourceVersion %s -> %s)", what, s.Name, s.ResourceVersion, after.ResourceVersion)
		}
	}
	for _, s := range foreign {
		for _, flags := range [][]string{{"--overwrite"}, nil} {
			args := append([]string{"join", s.Name, "--member-context", "alpha"}, flags...)
			r := run(t, args...)
			check(strings.Join(args, " "), r.code, r.stderr, s)
		}
	}

	r := runBuilt(t, "join", foreign[0].Name, "--member-context", "alpha", "--overwrite")
	check("kubectl-widgethub join --overwrite", r.code, r.stderr, foreign[0])

	if after := tokenSecretsIn(t, alpha); len(after) != len(tokensBefore) {
		t.Errorf("join minted tokens in the member although it registered nothing: %v, before %v", after, tokensBefore)
	}
}
