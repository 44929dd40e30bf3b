package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// exitCodesDoc is the paragraph of docs/plugin.md that lists the exit codes,
// its white space folded.
func exitCodesDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Exit codes\n")
	if !ok {
		t.Fatal("docs/plugin.md has no section Exit codes")
	}
	section, _, _ = strings.Cut(section, "\n#")
	return strings.Join(strings.Fields(section), " ")
}

// Each exit code docs/plugin.md documents, from the built kubectl-widgethub
// (main's os.Exit, as kubectl and scripts see it), compared with the number
// the docs and --help give, never with the plugin's own constants.
func TestExitCodesOfTheBuiltPlugin(t *testing.T) {
	ctx := context.Background()
	k := writeBrokenKubeconfigs(t)
	unjoinCleanup(t, "alpha", "alpha")
	join(t, "alpha", "alpha")
	// A Secret of the hub that is not a registration: join and unjoin leave it alone.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "helm-release"}, Data: map[string][]byte{"release": []byte("x")}}
	if err := testFleet.Hub.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, foreign) })

	docs := exitCodesDoc(t)
	help := strings.Join(strings.Fields(runBuilt(t, "--help").stdout), " ")
	for _, tc := range []struct {
		code int
		// meaning is how docs/plugin.md and --help name the code.
		meaning string
		args    []string
		stderr  string
	}{
		{0, "0 ok", []string{"clusters"}, ""},
		{1, "1 error", []string{"join", "gamma", "--member-context", "beta", "--registration-namespace", "elsewhere"}, `registration namespace "elsewhere" does not exist`},
		{2, "2 usage", []string{"clusters", "-o", "table"}, `--output "table" is not an output format`},
		{2, "2 usage", []string{"join", "Alpha_1", "--member-context", "alpha"}, `invalid cluster name "Alpha_1"`},
		{3, "3 kubeconfig or context problem", []string{"clusters", "--context", "nope"}, `hub: context "nope" not found`},
		{4, "4 cluster unreachable", []string{"clusters", "--kubeconfig", k.down, "--context", "alpha"}, "hub: cannot reach the API server"},
		{5, "5 already registered", []string{"join", "alpha", "--member-context", "alpha"}, `"alpha" is already registered on the hub`},
		{6, "6 no such registration", []string{"unjoin", "gamma", "--member-context", "beta"}, `"gamma" is not registered on the hub`},
		{7, "7 conflict", []string{"join", foreign.Name, "--member-context", "alpha", "--overwrite"}, "is not a widgethub registration"},
		{7, "7 conflict", []string{"unjoin", foreign.Name, "--member-context", "alpha"}, "is not a widgethub registration"},
	} {
		r := runBuilt(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("kubectl-widgethub %s: want exit %d and %q on stderr, got %s", strings.Join(tc.args, " "), tc.code, tc.stderr, r)
		}
		if tc.code != 0 && !regexp.MustCompile(`(?m)^error: `).MatchString(r.stderr) {
			t.Errorf("kubectl-widgethub %s: stderr has no error line: %q", strings.Join(tc.args, " "), r.stderr)
		}
		if !strings.Contains(docs, tc.meaning) || !strings.Contains(help, tc.meaning) {
			t.Errorf("exit %d: docs/plugin.md (%q) or --help (%q) do not say %q", tc.code, docs, help, tc.meaning)
		}
	}
	// The Secret that is not a registration is as it was.
	after := &corev1.Secret{}
	if err := testFleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(foreign), after); err != nil || after.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the Secret %s changed or went: %v", foreign.Name, err)
	}
}
