package plugin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// join and unjoin follow no redirect of a member: a member answering 302 or
// 307 to another host (plain HTTP, or HTTPS that the member's CA signs) is
// reported unreachable, and the other host receives nothing.
func TestPluginFollowsNoRedirect(t *testing.T) {
	alpha := testFleet.Member("alpha")
	adminToken := clusterAdminToken(t, alpha)
	proxy, memberKubeconfig := proxiedKubeconfig(t, alpha, adminToken)
	for _, https := range []bool{false, true} {
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			t.Run(fmt.Sprintf("%d https=%v", code, https), func(t *testing.T) {
				rec := fleet.NewRecorder(nil)
				if https {
					rec.Close()
					rec = fleet.NewRecorder(proxy.Certificate())
				}
				defer rec.Close()
				proxy.Set(fleet.Fault{Answer: fleet.Redirect(code, rec.URL())})
				defer proxy.Clear()
				for _, args := range [][]string{
					{"join", "redirected", "--member-kubeconfig", memberKubeconfig},
					{"unjoin", "redirected", "--member-kubeconfig", memberKubeconfig},
				} {
					r := run(t, args...)
					if r.code != plugin.ExitUnreachable || !strings.Contains(r.stderr, "redirect") {
						t.Errorf("%s against a redirecting member: %s", args[0], r)
					}
				}
				if all, withAuth := rec.Requests(); all != 0 {
					t.Errorf("the other host received %d requests, %d with an Authorization header", all, withAuth)
				}
			})
		}
	}
}

// A member whose every answer is a gzip bomb decompressing to 256 MiB, or
// a body without end: join and unjoin fail at the bounds of a member's
// answers, as the hub's (the discovery document's 1 MiB first), and say so;
// the plugin does not read the whole bomb, nor wait for the end.
func TestPluginBoundsItsContextsAnswers(t *testing.T) {
	alpha := testFleet.Member("alpha")
	proxy, memberKubeconfig := proxiedKubeconfig(t, alpha, clusterAdminToken(t, alpha))
	for name, answer := range map[string]http.Handler{
		"gzip bomb":    fleet.GzipBomb(`{"kind":"APIGroupList","groups":[`, 256<<20),
		"endless body": fleet.EndlessBody(`{"kind":"APIGroupList","groups":[`),
	} {
		t.Run(name, func(t *testing.T) {
			proxy.Set(fleet.Fault{Answer: answer})
			defer proxy.Clear()
			for _, args := range [][]string{
				{"join", "bombed", "--member-kubeconfig", memberKubeconfig},
				{"unjoin", "bombed", "--member-kubeconfig", memberKubeconfig},
			} {
				r := run(t, args...)
				if r.code == 0 || !strings.Contains(r.stderr, "member answer too large") {
					t.Errorf("%s against a member answering a %s: %s\n%s", args[0], name, r, r.stderr)
				}
			}
		})
	}
}
