package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/config"
	"github.com/widgethub/widgethub/internal/fleet"
)

// members are the demo's member clusters.
var members = []string{"alpha", "beta"}

// sampleNamespace is where the sample Widgets go in each member.
const sampleNamespace = "default"

// options of a demo run.
type options struct {
	// out receives the progress lines and the plugin's output.
	out io.Writer
	// exitWhenReady ends the run once every sample Widget is Ready, instead
	// of waiting for the context to end.
	exitWhenReady bool
	// readyTimeout bounds the wait for Ready Widgets.
	readyTimeout time.Duration
	// metricsBindAddress of the manager; "0" disables metrics.
	metricsBindAddress string
}

// demo is one run: its options, and the fleet it started with that fleet's
// admin kubeconfig files.
type demo struct {
	opts  options
	start time.Time
	fleet *fleet.Fleet
	files *fleet.KubeconfigFiles
}

// run runs the demo until ctx ends (or until the Widgets are Ready with
// exitWhenReady). It needs KUBEBUILDER_ASSETS, as the tests do.
func run(ctx context.Context, opts options) (err error) {
	d := &demo{opts: opts, start: time.Now()}
	dir, err := os.MkdirTemp("", "widgethub-demo-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, logFile.Close()) }()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	stopFleet, err := d.startFleet(ctx, dir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopFleet()) }()
	access, err := d.setUpAccessProvider(dir)
	if err != nil {
		return err
	}
	stopManager, err := startManager(ctx, d.fleet, opts.metricsBindAddress, access.File)
	if err != nil {
		return err
	}
	defer func() {
		d.say("stopping the manager")
		err = errors.Join(err, stopManager())
	}()
	d.say("manager running in-process on the hub (log: %s)", logPath)

	if err := d.joinMembers(ctx); err != nil {
		return err
	}
	if err := d.registerThroughClusterProfile(ctx, access, profileMember); err != nil {
		return err
	}
	if err := d.showReadySamples(ctx, access.File); err != nil {
		return err
	}
	if opts.exitWhenReady {
		d.say("every sample Widget is Ready; exiting as asked (--exit-when-ready)")
		return nil
	}
	d.say("the fleet stays up until Ctrl+C")
	<-ctx.Done()
	fmt.Fprintln(opts.out)
	return nil
}

// say prints a progress line with the time since the start of the run.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.opts.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// startFleet starts the hub and the members, writes their admin kubeconfigs
// into dir and creates the registration namespace on the hub. The returned
// function stops the fleet; on error the fleet is already stopped.
func (d *demo) startFleet(ctx context.Context, dir string) (stop func() error, err error) {
	d.say("starting a hub and members %s as local control planes (kube-apiserver + etcd)...", strings.Join(members, ", "))
	// The members start without the Widget CRD: join installs it. The hub
	// serves ClusterProfiles too (the CRD of cluster-inventory-api).
	profiles, err := fleet.ClusterProfileCRD()
	if err != nil {
		return nil, err
	}
	f, err := fleet.Start(fleet.Options{Members: members, Scheme: clusters.NewScheme(), MemberCRDs: []string{},
		HubCRDs: append(fleet.CRDPaths(), profiles)})
	if err != nil {
		return nil, err
	}
	stop = func() error {
		d.say("stopping the control planes")
		return f.Stop()
	}
	d.fleet = f
	if d.files, err = f.WriteKubeconfigs(dir); err != nil {
		return nil, errors.Join(err, stop())
	}
	d.say("control planes up: hub %s, %s", f.Hub.Config.Host, memberHosts(f))
	if err := f.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: registration.DefaultNamespace}}); err != nil {
		return nil, errors.Join(fmt.Errorf("create the registration namespace: %w", err), stop())
	}
	return stop, nil
}

// kubectl runs `kubectl widgethub args...` in-process against the hub and
// prints the command and its output.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	fmt.Fprintf(d.opts.out, "$ kubectl widgethub %s\n", strings.Join(args, " "))
	full := append([]string{"--kubeconfig", d.files.All, "--context", d.fleet.Hub.Name}, args...)
	if code := plugin.Run(ctx, full, d.opts.out, d.opts.out); code != plugin.ExitOK {
		return fmt.Errorf("kubectl widgethub %s: exit code %d", strings.Join(args, " "), code)
	}
	fmt.Fprintln(d.opts.out)
	return nil
}

// joinMembers joins every member to the hub with the kubectl plugin.
func (d *demo) joinMembers(ctx context.Context) error {
	for _, m := range members {
		d.say("joining %s with the kubectl plugin:", m)
		if err := d.kubectl(ctx, "join", m, "--member-context", m); err != nil {
			return err
		}
	}
	return nil
}

// showReadySamples applies the sample Widgets to every member, plays the
// Deployment controller until they are Ready, and shows the fleet through the
// plugin (which reads the ClusterProfile's member through providerFile, as
// the hub does) and the kubeconfig files to explore it with.
func (d *demo) showReadySamples(ctx context.Context, providerFile string) error {
	samples, err := applySamples(ctx, d.fleet)
	if err != nil {
		return err
	}
	d.say("applied the sample Widgets %s (config/samples) in namespace %s of %s", strings.Join(samples, ", "), sampleNamespace, strings.Join(members, " and "))
	go playDeploymentController(ctx, d.fleet)
	d.say("standing in for the Deployment controller: Deployments report their replicas available")

	if err := waitReady(ctx, d.fleet, samples, d.opts.readyTimeout, d.say); err != nil {
		return err
	}
	waitMemberClusters(ctx, d.fleet, int32(len(samples)))
	if err := d.kubectl(ctx, "clusters"); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "widgets", "-A", "--clusterprofile-provider-file", providerFile); err != nil {
		return err
	}
	printTryIt(d.opts.out, d.files, providerFile)
	return nil
}

func memberHosts(f *fleet.Fleet) string {
	var parts []string
	for _, m := range f.Members {
		parts = append(parts, m.Name+" "+m.Config.Host)
	}
	return strings.Join(parts, ", ")
}

// startManager runs the hub manager on f's hub, with ClusterProfiles read
// through the access providers of providerFile, and returns its stop function.
func startManager(ctx context.Context, f *fleet.Fleet, metrics, providerFile string) (func() error, error) {
	opts := app.DefaultOptions()
	opts.ClusterProfileProviderFile = providerFile
	opts.LeaderElection = false // one manager in-process: no standby to hand over to
	opts.MetricsBindAddress = metrics
	if opts.MetricsBindAddress == "" {
		opts.MetricsBindAddress = "0"
	}
	// A local run: plain HTTP that curl reads without a token (--metrics-secure=false).
	opts.MetricsSecure = false
	opts.HealthProbeBindAddress = "0"
	opts.MemberSyncTimeout = 15 * time.Second
	// Probe often, so that MemberCluster status follows the demo closely.
	opts.ProbeInterval = time.Second
	opts.GracefulShutdownTimeout = 10 * time.Second
	return app.Start(ctx, f.Hub.Config, opts)
}

// applySamples creates the sample Widgets in every member and returns their names.
func applySamples(ctx context.Context, f *fleet.Fleet) ([]string, error) {
	files, err := config.Samples()
	if err != nil {
		return nil, err
	}
	var widgets []*v1alpha1.Widget
	for _, name := range slices.Sorted(mapKeys(files)) {
		w := &v1alpha1.Widget{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(files[name]), 4096).Decode(w); err != nil {
			return nil, fmt.Errorf("sample %s: %w", name, err)
		}
		w.Namespace = sampleNamespace
		widgets = append(widgets, w)
	}
	var names []string
	for _, w := range widgets {
		names = append(names, w.Name)
		for _, m := range f.Members {
			if err := m.Client.Create(ctx, w.DeepCopy()); err != nil {
				return nil, fmt.Errorf("create sample Widget %s in %s: %w", w.Name, m.Name, err)
			}
		}
	}
	return names, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// playDeploymentController does the part of kube-controller-manager that the
// Widgets wait for: every Deployment reports its replicas updated, ready and
// available, for its current generation.
func playDeploymentController(ctx context.Context, f *fleet.Fleet) {
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, m := range f.Members {
			var list appsv1.DeploymentList
			if err := m.Client.List(ctx, &list); err != nil {
				continue
			}
			for i := range list.Items {
				d := &list.Items[i]
				want := int32(1)
				if d.Spec.Replicas != nil {
					want = *d.Spec.Replicas
				}
				s := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: want,
					UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want}
				if d.Status.ObservedGeneration == s.ObservedGeneration && d.Status.AvailableReplicas == want && d.Status.Replicas == want {
					continue
				}
				d.Status = s
				// A conflict is retried on the next tick.
				_ = m.Client.Status().Update(ctx, d)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// waitReady waits until every sample Widget in every member is Ready for its
// current generation, reporting progress when it changes.
func waitReady(ctx context.Context, f *fleet.Fleet, samples []string, timeout time.Duration, say func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		var parts []string
		all := true
		for _, m := range f.Members {
			ready := 0
			for _, name := range samples {
				w := &v1alpha1.Widget{}
				err := m.Client.Get(ctx, client.ObjectKey{Namespace: sampleNamespace, Name: name}, w)
				if err == nil && w.Status.ObservedGeneration == w.Generation &&
					meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WidgetReady) {
					ready++
				}
			}
			all = all && ready == len(samples)
			parts = append(parts, fmt.Sprintf("%s %d/%d", m.Name, ready, len(samples)))
		}
		if progress := strings.Join(parts, ", "); progress != last {
			say("Ready Widgets: %s", progress)
			last = progress
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sample Widgets not Ready after %s (%s): see the manager log", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitMemberClusters gives the hub a few seconds to report every member
// Ready with its sample Widgets counted, so that `clusters` shows a settled
// fleet. It prints nothing: `clusters` shows whatever state the hub reached.
func waitMemberClusters(ctx context.Context, f *fleet.Fleet, widgets int32) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var list v1alpha1.MemberClusterList
		if err := f.Hub.Client.List(ctx, &list, client.InNamespace(registration.DefaultNamespace)); err != nil {
			return
		}
		settled := 0
		for _, mc := range list.Items {
			if meta.IsStatusConditionTrue(mc.Status.Conditions, v1alpha1.MemberReady) && mc.Status.Widgets == widgets {
				settled++
			}
		}
		if settled == len(f.Members) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func printTryIt(out io.Writer, files *fleet.KubeconfigFiles, providerFile string) {
	fmt.Fprintf(out, `The fleet is yours to explore. Admin kubeconfigs (deleted when the demo ends):
  %s   contexts hub, alpha, beta (current: hub)
`, files.All)
	for _, name := range slices.Sorted(mapKeys(files.Each)) {
		fmt.Fprintf(out, "  %s\n", files.Each[name])
	}
	fmt.Fprintf(out, `In another terminal:
  export KUBECONFIG=%s
  kubectl --context alpha get widgets,deployments
  kubectl --context beta scale widget cart --replicas 3
  kubectl -n widgethub-system get secrets,clusterprofiles,memberclusters
  make build-plugin && PATH=$PWD/bin:$PATH kubectl widgethub widgets -A --clusterprofile-provider-file %s

`, files.All, providerFile)
}
