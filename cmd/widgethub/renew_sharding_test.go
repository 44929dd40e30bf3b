//go:build scenarios

package main_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// With --sharding, only the replica that serves a member that join
// registered renews its token: every TokenRequest of the hub's identity at
// the member carries that replica's user agent. When that replica is killed,
// the one that takes the member over renews it on from the token in the
// Secret, nothing else being handed over.
func TestShardedRenewalByTheServingReplicaOnly(t *testing.T) {
	const ns, name = "renew-sharded", "renewed"
	ctx := t.Context()
	if err := fleet.EnsureNamespace(ctx, testFleet.Hub.Client, ns); err != nil {
		t.Fatal(err)
	}
	files, err := testFleet.WriteKubeconfigs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	east := testFleet.Member("east")
	kubectl := func(args ...string) {
		t.Helper()
		var out bytes.Buffer
		args = append([]string{"--kubeconfig", files.All, "--context", "hub", "--registration-namespace", ns}, args...)
		if code := plugin.Run(context.Background(), args, &out, &out); code != 0 {
			t.Fatalf("kubectl widgethub %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
	}
	kubectl("join", name, "--member-context", "east", "--token-ttl", "10m")
	t.Cleanup(func() { kubectl("unjoin", name, "--cleanup", "--member-context", "east") })

	// Renewed 12 s into a 10-minute token.
	renew := []string{"--token-renew-remaining=0.98", "--token-renew-min-interval=10s"}
	replicas := map[string]*replica{"q1": startReplicaWith(t, ns, "q1", hubKubeconfig, renew...), "q2": startReplicaWith(t, ns, "q2", hubKubeconfig, renew...)}

	// renewals are the TokenRequests of the hub's identity at east since
	// since, by user agent.
	renewals := func(since time.Time) map[string]int {
		writes, err := east.Writes()
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]int{}
		for _, w := range writes {
			if w.Resource == "serviceaccounts/token" && w.User == "system:serviceaccount:widgethub-system:widgethub-member" && w.Received.After(since) {
				by[w.UserAgent]++
			}
		}
		return by
	}
	servedBy := func(ctx context.Context) (string, error) {
		mc := &v1alpha1.MemberCluster{}
		if err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
			return "", err
		}
		if mc.Status.ServedBy == "" {
			return "", fmt.Errorf("not served yet")
		}
		return mc.Status.ServedBy, nil
	}
	token := func(ctx context.Context) (string, error) {
		s := &corev1.Secret{}
		if err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return "", err
		}
		cfg, err := connect.RESTConfig(s.Data[registration.SecretKey], connect.ConfigOptions{})
		if err != nil {
			return "", err
		}
		fleet.HandOver(cfg.REST.BearerToken) // the hub's renewals, besides the joined token
		return cfg.REST.BearerToken, nil
	}
	// waitRenewed waits for a token other than those seen and returns it.
	seen := map[string]bool{}
	waitRenewed := func(what string) {
		t.Helper()
		waitFor(t, time.Minute, what, func(ctx context.Context) error {
			tok, err := token(ctx)
			if err != nil {
				return err
			}
			if len(seen) > 0 && seen[tok] {
				return fmt.Errorf("not renewed yet")
			}
			seen[tok] = true
			return nil
		})
	}
	start := time.Now()
	waitRenewed("the joined token")
	waitRenewed("a first renewal")
	waitRenewed("a second renewal")
	var first string
	waitFor(t, time.Minute, "served", func(ctx context.Context) (err error) { first, err = servedBy(ctx); return err })
	by := renewals(start)
	t.Logf("renewals at the member by user agent, %s after join: %v", time.Since(start).Round(time.Second), by)
	if len(by) != 1 || by["widgethub/"+first] < 2 {
		t.Fatalf("TokenRequests by user agent %v; want only widgethub/%s, which serves the member, at least twice", by, first)
	}

	// Its replica goes; the other one serves and renews the member.
	killed := time.Now()
	_ = replicas[first].Signal(syscall.SIGKILL)
	<-replicas[first].Exited()
	var next string
	waitFor(t, time.Minute, "served by the other replica", func(ctx context.Context) error {
		var err error
		if next, err = servedBy(ctx); err == nil && next == first {
			err = fmt.Errorf("still shown as served by %s", first)
		}
		return err
	})
	waitRenewed("a renewal by the replica that took the member over")
	by = renewals(killed)
	t.Logf("after %s was killed, renewals by user agent: %v", first, by)
	if len(by) != 1 || by["widgethub/"+next] < 1 {
		t.Fatalf("TokenRequests after the kill by user agent %v; want only widgethub/%s", by, next)
	}
}
