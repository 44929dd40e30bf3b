//go:build scenarios

package main_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/providers/sharding"
)

// The manager's replicas run as processes of the built binary, so that a
// kill or a stop is real; the member API servers' audit logs tell which
// replica wrote what.
var (
	testFleet     *fleet.Fleet
	managerBinary string
	hubKubeconfig string
)

func TestMain(m *testing.M) {
	// The replicas log to their own files; this process logs only through
	// envtest (installing CRDs), which is not read.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(fleet.RunTests(m, fleet.Options{Members: []string{"east", "west"}, Scheme: clusters.NewScheme(), AuditMembers: true},
		func(f *fleet.Fleet) (func() error, error) {
			testFleet = f
			dir, err := os.MkdirTemp("", "widgethub-sharding-")
			if err != nil {
				return nil, err
			}
			if managerBinary, err = fleet.ManagerBinary(); err != nil {
				return nil, err
			}
			hubKubeconfig = filepath.Join(dir, "hub.kubeconfig")
			if err := os.WriteFile(hubKubeconfig, f.Hub.Kubeconfig, 0o600); err != nil {
				return nil, err
			}
			return func() error { return os.RemoveAll(dir) }, nil
		}))
}

// replica is one manager process.
type replica struct {
	*fleet.Process
	id      string
	metrics string
}

func startReplica(t *testing.T, namespace, id string) *replica {
	t.Helper()
	return startReplicaWith(t, namespace, id, hubKubeconfig)
}

// startReplicaWith starts a replica that reaches the hub through the
// kubeconfig file at kubeconfigPath, with the manager flags extra besides.
func startReplicaWith(t *testing.T, namespace, id, kubeconfigPath string, extra ...string) *replica {
	t.Helper()
	addr, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := fleet.StartProcess(managerBinary, filepath.Join(t.TempDir(), id+".log"),
		append([]string{"--kubeconfig", kubeconfigPath, "--sharding", "--replica-id", id, "--registration-namespace", namespace,
			"--metrics-bind-address", addr, "--metrics-secure=false", "--health-probe-bind-address", "0", "--zap-log-level", "info"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	killAtEnd(t, "replica "+id, proc)
	return &replica{Process: proc, id: id, metrics: "http://" + addr + "/metrics"}
}

// killAtEnd kills p, the manager process called name, when t ends. t fails
// if p's log holds a credential handed to the operator (fleet.HandOver:
// the members' kubeconfigs, tokens), and shows its last lines if it failed.
func killAtEnd(t *testing.T, name string, p *fleet.Process) {
	t.Cleanup(func() {
		p.Kill()
		if err := p.LeakedCredentials(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if t.Failed() {
			lines := strings.Split(p.Log(), "\n")
			t.Logf("last lines of %s:\n%s", name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
}

// owned reads widgethub_members_owned from the replica's metrics, -1 when unreadable.
func (r *replica) owned(ctx context.Context) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := `widgethub_members_owned{replica="` + r.id + `"} `
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return -1
}

// register creates n registrations spread over the members, each a user of
// its own, and returns each registration's user name by registration.
func register(t *testing.T, namespace string, n int) map[string]string {
	t.Helper()
	users := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("reg-%02d", i)
		registerMember(t, namespace, name, testFleet.Members[i%len(testFleet.Members)])
		users[name] = namespace + "-" + name
	}
	return users
}

// registerMember registers member as name in ns with a user of its own,
// called ns-name.
func registerMember(t *testing.T, ns, name string, member *fleet.ControlPlane) {
	t.Helper()
	kc := memberKubeconfig(t, member, ns+"-"+name)
	if err := testFleet.Hub.Client.Create(t.Context(), registration.NewSecret(ns, name, kc)); err != nil {
		t.Fatal(err)
	}
}

// memberKubeconfig is a kubeconfig of member for a new user of it called
// user, in system:masters: the member's audit log tells its requests apart.
func memberKubeconfig(t *testing.T, member *fleet.ControlPlane, user string) []byte {
	t.Helper()
	u, err := member.Env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	fleet.HandOverKubeconfig(kc)
	return kc
}

// hubNamespace makes a registration namespace on the hub for one test run:
// prefix and a number from the clock, so that runs do not meet.
func hubNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := prefix + "-" + strconv.FormatInt(time.Now().Unix()%100000, 10)
	if err := fleet.EnsureNamespace(t.Context(), testFleet.Hub.Client, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// servedBy returns, for every Ready MemberCluster, the replica serving it.
func servedBy(ctx context.Context, namespace string) (map[string]string, error) {
	list := &v1alpha1.MemberClusterList{}
	if err := testFleet.Hub.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	served := map[string]string{}
	for _, mc := range list.Items {
		if meta.IsStatusConditionTrue(mc.Status.Conditions, v1alpha1.MemberReady) && mc.Status.ServedBy != "" {
			served[mc.Name] = mc.Status.ServedBy
		}
	}
	return served, nil
}

// servedByReplica lists the registrations that served shows served by replica.
func servedByReplica(served map[string]string, replica string) []string {
	var regs []string
	for reg, r := range served {
		if r == replica {
			regs = append(regs, reg)
		}
	}
	return regs
}

// waitServedElsewhere waits until every one of regs is Ready and served by
// a replica other than gone, and returns how long that took.
func waitServedElsewhere(t *testing.T, namespace string, regs []string, gone, what string) time.Duration {
	t.Helper()
	return waitFor(t, time.Minute, what, func(ctx context.Context) error {
		served, err := servedBy(ctx, namespace)
		if err != nil {
			return err
		}
		for _, reg := range regs {
			if r := served[reg]; r == "" || r == gone {
				return fmt.Errorf("registration %s is served by %q", reg, r)
			}
		}
		return nil
	})
}

func waitFor(t *testing.T, within time.Duration, what string, cond func(ctx context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settled waits until every registration is Ready and served by one of
// replicas, each serving its fair share to within one, as both the
// MemberClusters and the replicas' widgethub_members_owned say.
func settled(t *testing.T, namespace string, n int, replicas []*replica, within time.Duration) map[string]string {
	t.Helper()
	var served map[string]string
	took := waitFor(t, within, "every registration served by one replica, fairly", func(ctx context.Context) error {
		var err error
		if served, err = servedBy(ctx, namespace); err != nil {
			return err
		}
		if len(served) != n {
			return fmt.Errorf("%d of %d registrations Ready", len(served), n)
		}
		count := map[string]int{}
		for _, r := range served {
			count[r]++
		}
		low, high := n/len(replicas), (n+len(replicas)-1)/len(replicas)
		for _, r := range replicas {
			if count[r.id] < low || count[r.id] > high {
				return fmt.Errorf("replica %s serves %d, want %d to %d (%v)", r.id, count[r.id], low, high, count)
			}
			if owned := r.owned(ctx); owned != count[r.id] {
				return fmt.Errorf("replica %s reports %d members owned, the MemberClusters %d", r.id, owned, count[r.id])
			}
		}
		return nil
	})
	t.Logf("%d registrations settled on %d replicas in %s", n, len(replicas), took.Round(100*time.Millisecond))
	return served
}

// serving samples, every 100 ms, which members each replica serves (its
// widgethub_member_engaged_since_seconds above 0), to measure the gap in
// service of a member that changes hands.
type serving struct {
	mu       sync.Mutex
	replicas []*replica
	rounds   int
	first    map[[2]string]time.Time // (member, replica) -> first seen serving
	last     map[[2]string]time.Time // (member, replica) -> last seen serving
}

// watchServing samples replicas until ctx ends; it returns after a first
// round of samples, so that what they serve now is on record.
func watchServing(t *testing.T, ctx context.Context, replicas []*replica) *serving {
	// A copy: the caller's slice may grow into the same array.
	s := &serving{replicas: slices.Clone(replicas), first: map[[2]string]time.Time{}, last: map[[2]string]time.Time{}}
	go func() {
		for ctx.Err() == nil {
			s.mu.Lock()
			replicas := slices.Clone(s.replicas)
			s.mu.Unlock()
			for _, r := range replicas {
				members := r.serving(ctx)
				now := time.Now()
				s.mu.Lock()
				for _, m := range members {
					key := [2]string{m, r.id}
					if _, ok := s.first[key]; !ok {
						s.first[key] = now
					}
					s.last[key] = now
				}
				s.mu.Unlock()
			}
			s.mu.Lock()
			s.rounds++
			s.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	s.waitRound(t)
	return s
}

// add samples r too, from the next round on.
func (s *serving) add(r *replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replicas = append(s.replicas, r)
}

// waitRound waits for a round of samples that begins after the call.
func (s *serving) waitRound(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	target := s.rounds + 2
	s.mu.Unlock()
	waitFor(t, time.Minute, "a round of samples of the replicas' metrics", func(context.Context) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.rounds < target {
			return fmt.Errorf("%d rounds", s.rounds)
		}
		return nil
	})
}

// gap is how long member went unserved between from's last sample and to's first.
func (s *serving) gap(member, from, to string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok1 := s.last[[2]string{member, from}]
	first, ok2 := s.first[[2]string{member, to}]
	return first.Sub(last), ok1 && ok2
}

// serving lists the members the replica's metrics show engaged.
func (r *replica) serving(ctx context.Context) []string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var members []string
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, `widgethub_member_engaged_since_seconds{cluster="`)
		if !ok {
			continue
		}
		member, value, _ := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && v > 0 {
			members = append(members, member)
		}
	}
	return members
}

const widgetNamespace = "sharded"

// scaleAll sets every test Widget of every member to replicas.
func scaleAll(t *testing.T, replicas int32) {
	t.Helper()
	for _, m := range testFleet.Members {
		list := &v1alpha1.WidgetList{}
		if err := m.Client.List(t.Context(), list, client.InNamespace(widgetNamespace)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			w := &list.Items[i]
			patch := client.MergeFrom(w.DeepCopy())
			w.Spec.Replicas = ptr.To(replicas)
			if err := m.Client.Patch(t.Context(), w, patch); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// reconciled tells whether every test Widget's Deployment has replicas.
func reconciled(ctx context.Context, replicas int32) error {
	for _, m := range testFleet.Members {
		list := &v1alpha1.WidgetList{}
		if err := m.Client.List(ctx, list, client.InNamespace(widgetNamespace)); err != nil {
			return err
		}
		for _, w := range list.Items {
			d := &appsv1.Deployment{}
			if err := m.Client.Get(ctx, client.ObjectKeyFromObject(&w), d); err != nil {
				return fmt.Errorf("%s: widget %s: %w", m.Name, w.Name, err)
			}
			if got := ptr.Deref(d.Spec.Replicas, -1); got != replicas {
				return fmt.Errorf("%s: widget %s has %d replicas, want %d", m.Name, w.Name, got, replicas)
			}
		}
	}
	return nil
}

// checkOneWriterAtATime reads the members' audit logs and fails if two
// replicas ever wrote for the same registration at once: per registration
// (its user), the span from a replica's first to last write in a run of
// writes must not overlap another replica's span.
func checkOneWriterAtATime(t *testing.T, users map[string]string) {
	t.Helper()
	byUser := writesByUser(t)
	total, handovers := 0, 0
	for name, user := range users {
		writes := byUser[user]
		total += len(writes)
		type span struct {
			replica     string
			first, last time.Time
		}
		var spans []span
		for _, w := range writes {
			replica, _ := writer(w)
			if n := len(spans); n > 0 && spans[n-1].replica == replica {
				spans[n-1].last = w.Completed
				continue
			}
			spans = append(spans, span{replica, w.Received, w.Completed})
		}
		handovers += max(0, len(spans)-1)
		for i := 1; i < len(spans); i++ {
			if spans[i].first.Before(spans[i-1].last) {
				t.Errorf("registration %s: replica %s wrote from %s while replica %s wrote until %s",
					name, spans[i].replica, spans[i].first.Format(time.StampMicro), spans[i-1].replica, spans[i-1].last.Format(time.StampMicro))
			}
		}
	}
	if total == 0 {
		t.Fatal("the audit logs hold no write by a replica: the check would prove nothing")
	}
	t.Logf("audit: %d writes by replicas over %d registrations, %d changes of writer, none overlapping", total, len(users), handovers)
}

// The scenario in one run: three replicas share 60 registrations;
// one is killed, one stopped and resumed, one added; every change of hands
// is fenced, and no two replicas ever write for one registration at once.
func TestReplicasShareTheFleetAndHandOverFenced(t *testing.T) {
	ns := hubNamespace(t, "sharding")
	ensureWidgets(t)
	refuseTakeoverWidget(t)
	const registrations = 60
	users := register(t, ns, registrations)
	started := time.Now()
	replicas := []*replica{startReplica(t, ns, "r1"), startReplica(t, ns, "r2"), startReplica(t, ns, "r3")}

	before := settled(t, ns, registrations, replicas, 3*time.Minute)
	waitFor(t, time.Minute, "every Widget reconciled", func(ctx context.Context) error { return reconciled(ctx, 1) })
	waitWrittenByOwners(t, ns, slices.Collect(maps.Keys(users)), users, started)

	// SIGKILL: the others take over once r1's heartbeat expires (10s).
	killed := replicas[0]
	victims := servedByReplica(before, killed.id)
	_ = killed.Signal(syscall.SIGKILL)
	<-killed.Exited()
	killedAt := time.Now()
	scaleAll(t, 2) // changes made while r1's members have no replica
	replicas = replicas[1:]
	takeover := waitServedElsewhere(t, ns, victims, killed.id, "r1's members served by the others")
	t.Logf("SIGKILL: %d members of r1 served again %s after the kill", len(victims), takeover.Round(100*time.Millisecond))
	if limit := sharding.DefaultLeaseDuration + 5*time.Second; takeover > limit {
		t.Errorf("r1's members were served again %s after the kill, want within the lease duration + 5s (%s)", takeover, limit)
	}
	// Nothing lost: each of r1's registrations is reconciled by its new
	// owner, as the member's audit log shows with the registration's user.
	least, greatest := spread(waitWrittenByOwners(t, ns, victims, users, killedAt))
	t.Logf("SIGKILL: each of r1's %d registrations written to by its new owner %s-%s after the kill",
		len(victims), least.Round(100*time.Millisecond), greatest.Round(100*time.Millisecond))
	if limit := sharding.DefaultLeaseDuration + 5*time.Second; greatest > limit {
		t.Errorf("a registration of r1 was first written to by its new owner %s after the kill, want within the lease duration + 5s (%s)", greatest, limit)
	}
	// The change itself may have been written by any replica serving
	// another registration of the same member.
	waitFor(t, time.Minute, "the change made during the take-over reconciled", func(ctx context.Context) error { return reconciled(ctx, 2) })
	t.Logf("the change made during the take-over was reconciled %s after the kill", time.Since(killedAt).Round(100*time.Millisecond))
	settled(t, ns, registrations, replicas, time.Minute)

	// r1's replacement (a new Pod, a new id), then a 4th replica: about a
	// quarter of the members move to it, each through its fence.
	replicas = append(replicas, startReplica(t, ns, "r1b"))
	before = settled(t, ns, registrations, replicas, 2*time.Minute)
	sampling, stopSampling := context.WithCancel(t.Context())
	samples := watchServing(t, sampling, replicas)
	r4 := startReplica(t, ns, "r4")
	samples.add(r4)
	replicas = append(replicas, r4)
	joined := time.Now()
	after := settled(t, ns, registrations, replicas, 2*time.Minute)
	samples.waitRound(t) // a last sample of every replica
	stopSampling()
	moves := 0
	var longest time.Duration
	for reg, r := range after {
		if before[reg] == r {
			continue
		}
		moves++
		gap, ok := samples.gap(reg, before[reg], r)
		if !ok {
			t.Errorf("member %s moved from %s to %s, but the samples did not see both serve it", reg, before[reg], r)
			continue
		}
		longest = max(longest, gap)
	}
	t.Logf("a 4th replica joined: %d of %d members moved, settled %s after it started; the longest gap in service of a moved member %s (sampled every 100 ms)",
		moves, registrations, time.Since(joined).Round(100*time.Millisecond), longest.Round(10*time.Millisecond))
	if longest > 5*time.Second {
		t.Errorf("a moved member went unserved for %s: a fenced hand-over should take a drain and an engagement, not an expiry", longest)
	}
	if moves < registrations/4 || moves > registrations/4+registrations/10 {
		t.Errorf("%d members moved when a 4th replica joined, want about a quarter (%d)", moves, registrations/4)
	}
	if took := time.Since(joined); took > sharding.DefaultLeaseDuration {
		t.Errorf("the 4th replica's share settled after %s, as late as an expiry", took)
	}

	// A registration pinned to r4 is served by r4, and the shares stay fair.
	var pinned string
	for reg, r := range after {
		if r != "r4" {
			pinned = reg
			break
		}
	}
	secret := &corev1.Secret{}
	if err := testFleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: pinned}, secret); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Annotations = map[string]string{registration.PinAnnotation: "r4"}
	if err := testFleet.Hub.Client.Patch(t.Context(), secret, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the pinned registration served by r4", func(ctx context.Context) error {
		served, err := servedBy(ctx, ns)
		if err != nil {
			return err
		}
		if served[pinned] != "r4" {
			return fmt.Errorf("%s pinned to r4 is served by %q", pinned, served[pinned])
		}
		return nil
	})
	settled(t, ns, registrations, replicas, time.Minute)

	// SIGSTOP one past its lease: it must find its members gone and not
	// write to them until each is handed back to it through its fence.
	stopped := replicas[0]
	_ = stopped.Signal(syscall.SIGSTOP)
	waitServedElsewhere(t, ns, slices.Collect(maps.Keys(users)), stopped.id, "the stopped replica's members served by the others")
	scaleAll(t, 3)
	waitFor(t, time.Minute, "the change made while a replica is stopped reconciled", func(ctx context.Context) error { return reconciled(ctx, 3) })
	_ = stopped.Signal(syscall.SIGCONT)
	settled(t, ns, registrations, replicas, 2*time.Minute)
	scaleAll(t, 1)
	waitFor(t, time.Minute, "a change after the stopped replica resumed reconciled", func(ctx context.Context) error { return reconciled(ctx, 1) })

	// A clean stop hands over at once: no wait for an expiry.
	leaving := replicas[len(replicas)-1]
	leavers := servedByReplica(after, leaving.id)
	_ = leaving.Signal(syscall.SIGTERM)
	handover := waitServedElsewhere(t, ns, leavers, leaving.id, "the leaving replica's members served by the others")
	t.Logf("SIGTERM: the leaving replica's %d members served again after %s", len(leavers), handover.Round(100*time.Millisecond))
	if handover >= sharding.DefaultLeaseDuration {
		t.Errorf("a replica that stopped cleanly was taken over after %s, as late as an expiry", handover)
	}
	select {
	case <-leaving.Exited():
	case <-time.After(time.Minute):
		t.Error("the replica did not exit within a minute of SIGTERM")
	}
	if code := leaving.ExitCode(); code != 0 {
		t.Errorf("the replica exited with %d after SIGTERM", code)
	}
	checkOneWriterAtATime(t, users)

	// Nothing of a departed replica is left: its heartbeat is deleted.
	lease := &coordinationv1.Lease{}
	err := testFleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "widgethub-replica-" + leaving.id}, lease)
	if !apierrors.IsNotFound(err) {
		t.Errorf("the heartbeat Lease of a replica that stopped cleanly: %v, want it deleted", err)
	}
}

// ensureWidgets creates the test Widgets in every member unless they exist.
func ensureWidgets(t *testing.T) {
	t.Helper()
	for _, m := range testFleet.Members {
		err := fleet.CreateWidgets(t.Context(), m.Client, widgetNamespace, "w", 3, 3)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// A replica cut off from the hub (its connections hang) while it still
// reaches the members stops writing to them before its heartbeat can expire,
// so the replica that takes its members over never writes beside it.
func TestReplicaCutOffFromTheHubStopsWritingBeforeOthersTakeOver(t *testing.T) {
	ns := hubNamespace(t, "cutoff")
	ensureWidgets(t)
	const registrations = 10
	users := register(t, ns, registrations)

	hub, err := url.Parse(testFleet.Hub.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := fleet.NewProxy(hub.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Down)
	viaProxy, err := fleet.EditKubeconfig(testFleet.Hub.Kubeconfig, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.Server = "https://" + proxy.Addr()
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hub-via-proxy.kubeconfig")
	if err := os.WriteFile(path, viaProxy, 0o600); err != nil {
		t.Fatal(err)
	}
	cut := startReplicaWith(t, ns, "cut", path)
	other := startReplica(t, ns, "other")
	before := settled(t, ns, registrations, []*replica{cut, other}, 2*time.Minute)
	cutMembers := servedByReplica(before, cut.id)

	// The partition: every connection to the hub hangs.
	proxy.Hang(true)
	proxy.Down()
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	replicas := int32(2)
	takeover := waitFor(t, time.Minute, "the cut-off replica's members served by the other", func(ctx context.Context) error {
		// Changes keep coming meanwhile, so that both replicas have work.
		scaleAll(t, replicas)
		replicas = 3 - replicas
		served, err := servedBy(ctx, ns)
		if err != nil {
			return err
		}
		for _, reg := range cutMembers {
			if served[reg] != other.id {
				return fmt.Errorf("registration %s is served by %q", reg, served[reg])
			}
		}
		return nil
	})
	t.Logf("cut off from the hub: its %d members served by the other replica %s later", len(cutMembers), takeover.Round(100*time.Millisecond))
	if limit := sharding.DefaultLeaseDuration + 5*time.Second; takeover > limit {
		t.Errorf("the members of a replica cut off from the hub were served again after %s, want within %s", takeover, limit)
	}
	final := 3 - replicas
	waitFor(t, time.Minute, "the last change reconciled", func(ctx context.Context) error { return reconciled(ctx, final) })
	// The cut-off replica did try: its gate refused the writes once its
	// term was over (the audit below shows none of them reached a member).
	if refused := strings.Count(cut.Log(), sharding.ErrNotServing.Error()); refused == 0 {
		t.Error("the cut-off replica never had a request to a member refused by its gate: the test did not exercise the fence")
	} else {
		t.Logf("the cut-off replica's gate refused requests to members %d times", refused)
	}

	// The partition heals: the replica comes back in a new term and gets
	// its share again through the fences.
	proxy.Hang(false)
	proxy.Down()
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	settled(t, ns, registrations, []*replica{cut, other}, 2*time.Minute)
	t.Logf("the partition healed; shares fair again %s after the cut", time.Since(cutAt).Round(100*time.Millisecond))
	checkOneWriterAtATime(t, users)
}
