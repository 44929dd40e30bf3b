package members_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// terminalTricks clears the screen, sets the window title, and turns the
// rest of the line around.
const terminalTricks = "\x1b[2J\x1b]0;owned\x07\u202e"

// A member whose /version answers a gitVersion full of escape sequences:
// within the 4 KiB bound of that answer (1 KiB, about 2.5 KiB as JSON) it is
// engaged and its MemberCluster written (the CRD's maxLength does not refuse
// it) with a version that is bounded and printable; past it (1 MiB) it is
// reported ResponseTooLarge. No Event, no line of the manager's logs and no
// line of the plugin's clusters command holds the member's control
// characters or more than a few KiB of its text.
func TestHostileVersionReachesStatusBoundedAndPrintable(t *testing.T) {
	alpha := testFleet.Member("alpha")
	logged := len(hubtest.Logs.String())
	sizes := map[string]int{"hostile-version-1mib": 1 << 20, "hostile-version-1kib": 1 << 10}
	for name, size := range sizes {
		gitVersion := "v1.31.0" + strings.Repeat(terminalTricks, size/len(terminalTricks))
		registerBehindFront(t, name, alpha, func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/version" {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(version.Info{GitVersion: gitVersion, Major: "1", Minor: "31"})
			return true
		})
	}

	for name := range sizes {
		status, reason := metav1.ConditionTrue, v1alpha1.MemberEngagedReason
		if sizes[name] > clusters.MaxVersionBytes {
			status, reason = metav1.ConditionFalse, v1alpha1.MemberResponseTooLargeReason
		}
		mc := hubtest.ExpectMemberReady(t, name, status, reason)
		got := mc.Status.KubernetesVersion
		t.Logf("%s: kubernetesVersion %q (%d bytes)", name, got, len(got))
		if len(got) > v1alpha1.MaxVersionLength || strings.IndexFunc(got, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			t.Errorf("%s: kubernetesVersion %q, want at most %d printable bytes", name, got, v1alpha1.MaxVersionLength)
		}
		if name == "hostile-version-1kib" && !strings.HasPrefix(got, `v1.31.0\x1b[2J`) {
			t.Errorf("%s: kubernetesVersion %q, want the member's answer escaped", name, got)
		}
		NewWithT(t).Eventually(func(g Gomega) {
			events := hubtest.SecretEvents(g, name)
			g.Expect(events).NotTo(BeEmpty())
			for _, e := range events {
				g.Expect(e.Message).NotTo(ContainSubstring("\x1b"), "Event %s", e.Name)
			}
		}, hubtest.Within, hubtest.Poll).Should(Succeed())
	}

	// The manager's logs quote the version bounded too.
	for line := range strings.Lines(hubtest.Logs.String()[logged:]) {
		if strings.Contains(line, "hostile-version") && (len(line) > 4*v1alpha1.MaxMessageLength || strings.Contains(line, "\x1b")) {
			t.Errorf("the manager logged %d bytes of a hostile member's text: %.300q...", len(line), line)
		}
	}

	var stdout, stderr bytes.Buffer
	kubeconfig := hubtest.WriteFile(t, t.TempDir(), "hub.kubeconfig", testFleet.Hub.Kubeconfig)
	if code := plugin.Run(context.Background(), []string{"--kubeconfig", kubeconfig, "--registration-namespace", hubNS, "clusters"}, &stdout, &stderr); code != 0 {
		t.Fatalf("kubectl widgethub clusters: exit %d\n%s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	t.Logf("kubectl widgethub clusters:\n%s", out)
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("kubectl widgethub clusters prints a member's control characters: %q", out)
	}
	for name := range sizes {
		if !strings.Contains(out, name+" ") {
			t.Errorf("kubectl widgethub clusters does not list %s", name)
		}
	}
}

// A member whose every answer carries a warning of 256 KiB (bidirectional
// overrides; client-go refuses control characters there) and whose every
// watch of Widgets fails with a Status message of 2 MiB of escape sequences
// (its lists pass: it is engaged, and its cache watches again and again):
// the hub logs both, each bounded and printable, and keeps no more of them.
func TestHostileWarningsAndWatchErrorsAreLoggedBounded(t *testing.T) {
	alpha := testFleet.Member("alpha")
	logged := len(hubtest.Logs.String())
	marker := "hostile-answer-" + hubtest.RandomHex(t)
	warning := `299 - "` + marker + "-warning " + strings.Repeat("\u202e", (256<<10)/len("\u202e")) + `"`
	watchError := marker + "-watch " + strings.Repeat(terminalTricks, (2<<20)/len(terminalTricks))
	registerBehindFront(t, "hostile-answers", alpha, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Add("Warning", warning)
		if r.URL.Path != "/apis/"+v1alpha1.GroupVersion.String()+"/widgets" || fleet.NotWatch(r) {
			return false
		}
		fleet.WriteStatus(w, http.StatusInternalServerError, 0, watchError)
		return true
	})

	// Both reach the logs (the test would prove nothing otherwise), and
	// neither holds more than a bounded, printable part of the member's text.
	NewWithT(t).Eventually(func(g Gomega) {
		logs := hubtest.Logs.String()[logged:]
		g.Expect(logs).To(ContainSubstring(marker+"-warning"), "no warning of the member logged")
		g.Expect(logs).To(ContainSubstring(marker+"-watch"), "no watch error of the member logged")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	for line := range strings.Lines(hubtest.Logs.String()[logged:]) {
		if strings.Contains(line, marker) && (len(line) > 4*v1alpha1.MaxMessageLength || strings.ContainsAny(line, "\x1b\u202e")) {
			t.Errorf("the manager logged %d bytes of a hostile member's text: %.300q...", len(line), line)
		}
		if strings.Contains(line, marker+"-warning") && !strings.Contains(line, `"cluster": "hostile-answers"`) {
			t.Errorf("a warning of the member is logged without the member's name: %.300q...", line)
		}
	}
}

// registerBehindFront registers, for the test, member name: cp behind a
// front that answers with answer, reached with a token the front drops.
func registerBehindFront(t *testing.T, name string, cp *fleet.ControlPlane, answer fleet.Answer) {
	t.Helper()
	front, err := fleet.NewFront(cp, answer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	doc, err := front.Kubeconfig(cp.Kubeconfig, "harmless-"+hubtest.RandomHex(t))
	if err != nil {
		t.Fatal(err)
	}
	hubtest.RegisterData(t, name, map[string][]byte{"kubeconfig": doc})
}
