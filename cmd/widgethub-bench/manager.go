package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mckubeconfig "sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/reconcilers/widget"
)

// The hub managers the benchmark compares: widgethub, and
// multicluster-runtime's kubeconfig provider at client-go's defaults (peer)
// and at widgethub's QPS, burst and worker count (peerTuned), so that no row
// is decided by the settings alone.
const (
	widgethub = "widgethub"
	peer      = "peer"
	peerTuned = "peer-tuned"
)

// implTitles are the managers' column titles.
var implTitles = map[string]string{
	widgethub: widgethub,
	peer:      "peer (multicluster-runtime kubeconfig provider, client-go defaults)",
	peerTuned: "peer-tuned (the same at widgethub's QPS, burst and workers)",
}

// Each manager runs in a process of its own, this program started with
// -manager: a fresh manager per phase, controller names that cannot collide,
// and a heap that holds the manager only. The parent talks to it over stdin
// and stdout, one line each way:
//
//	ready             (sent once the hub's Secret informer has synced)
//	heap              -> heap <HeapInuse bytes>   (after two GCs)
//	which NAME...     -> which <those of NAMEs the manager can get>
//
// Closing stdin stops the manager.

// runManager runs the manager impl against the hub of kubeconfigPath.
func runManager(impl, kubeconfigPath, cpuProfileDir string, opts app.Options) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if cpuProfileDir != "" {
		// Fine-grained heap profiles: the default samples one allocation per
		// 512 KiB, too coarse for the cost of one member.
		runtime.MemProfileRate = 4 << 10
		f, err := os.CreateTemp(cpuProfileDir, impl+"-*.pprof")
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return fmt.Errorf("hub kubeconfig: %w", err)
	}
	// As the manager binary gets its hub config from ctrl.GetConfig: no
	// client-side limit toward the hub, whose API priority and fairness
	// applies. client-go's default of 5 QPS would otherwise throttle every
	// manager's MemberCluster writes and Events in the bench alone.
	cfg.QPS = -1
	var mgr mcmanager.Manager
	switch impl {
	case widgethub:
		opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
		mgr, err = app.New(cfg, opts)
	case peer:
		mgr, err = newPeer(cfg, opts.RegistrationNamespace, nil)
	case peerTuned:
		mgr, err = newPeer(cfg, opts.RegistrationNamespace, &opts)
	default:
		err = fmt.Errorf("unknown manager %q", impl)
	}
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if _, err := mgr.GetLocalManager().GetCache().GetInformer(ctx, &corev1.Secret{}); err != nil {
		return fmt.Errorf("hub Secret informer: %w", err)
	}
	fmt.Println("ready")

	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 0, 64<<10), 4<<20) // a fleet's names on one line
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "heap":
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if err := writeHeapProfile(cpuProfileDir, impl); err != nil {
				fmt.Println("error", err)
				continue
			}
			fmt.Println("heap", ms.HeapInuse)
		case "which":
			got := []string{"which"}
			for _, name := range fields[1:] {
				if _, err := mgr.GetCluster(ctx, multicluster.ClusterName(name)); err == nil {
					got = append(got, name)
				}
			}
			fmt.Println(strings.Join(got, " "))
		default:
			fmt.Println("error unknown command", fields[0])
		}
	}
	cancel()
	err = <-done
	if err != nil {
		// A manager that does not stop in time: show where it hangs.
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	}
	return err
}

// writeHeapProfile writes a heap profile of impl's manager into dir, when
// set: one per measurement of the heap, the first without members, so that
// `go tool pprof -base` shows what members cost.
func writeHeapProfile(dir, impl string) error {
	if dir == "" {
		return nil
	}
	f, err := os.CreateTemp(dir, impl+"-heap-*.pprof")
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}

// newPeer is multicluster-runtime's kubeconfig provider, reading widgethub's
// registration Secrets, with its default queue, driving widgethub's Widget
// reconciler through multicluster-runtime's builder. With tuned nil it keeps
// client-go's and the builder's defaults; otherwise it takes tuned's member
// QPS, burst and worker count.
func newPeer(cfg *rest.Config, namespace string, tuned *app.Options) (mcmanager.Manager, error) {
	scheme := clusters.NewScheme()
	providerOpts := mckubeconfig.Options{
		Namespace:             namespace,
		KubeconfigSecretLabel: registration.SecretLabel,
		KubeconfigSecretKey:   registration.SecretKey,
		ClusterOptions:        []cluster.Option{func(o *cluster.Options) { o.Scheme = scheme }},
	}
	var controllerOpts mccontroller.Options
	if tuned != nil {
		providerOpts.RESTOptions = []func(*rest.Config) error{func(c *rest.Config) error {
			c.QPS, c.Burst = float32(tuned.MemberQPS), tuned.MemberBurst
			return nil
		}}
		controllerOpts.MaxConcurrentReconciles = tuned.MaxConcurrentReconciles
	}
	provider := mckubeconfig.New(providerOpts)
	mgr, err := mcmanager.New(cfg, provider, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("peer manager: %w", err)
	}
	if err := provider.SetupWithManager(context.Background(), mgr); err != nil {
		return nil, fmt.Errorf("peer provider: %w", err)
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		For(&v1alpha1.Widget{}).
		Owns(&appsv1.Deployment{}).
		WithOptions(controllerOpts).
		Complete(&widget.Reconciler{Clusters: mgr})
	if err != nil {
		return nil, fmt.Errorf("peer widget controller: %w", err)
	}
	return mgr, nil
}

// managerProcess is a running manager subprocess.
type managerProcess struct {
	impl    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	exited  chan struct{}
	waitErr error
	// killed: the bench killed it, so that it exits with an error is expected.
	killed bool
	// logPath is where its log goes.
	logPath string
}

// startManager starts impl as a subprocess of this program; its log goes to logPath.
func startManager(impl, logPath string, args []string) (*managerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{"-manager", impl}, args...)...)
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s manager: %w", impl, err)
	}
	p := &managerProcess{impl: impl, cmd: cmd, stdin: stdin, lines: make(chan string, 16), exited: make(chan struct{}), logPath: logPath}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20) // answers of which
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// next returns the next line of the manager.
func (p *managerProcess) next(ctx context.Context) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.exited
			return "", fmt.Errorf("%s manager exited: %v (see its log)", p.impl, p.waitErr)
		}
		return line, nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s manager did not answer: %w", p.impl, ctx.Err())
	}
}

// waitReady waits until the manager's hub cache has synced.
func (p *managerProcess) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	line, err := p.next(ctx)
	if err != nil {
		return err
	}
	if line != "ready" {
		return fmt.Errorf("%s manager: unexpected %q", p.impl, line)
	}
	return nil
}

// ask sends the manager a command and returns the words of its answer after
// the command's name, which the answer starts with.
func (p *managerProcess) ask(ctx context.Context, command string, args ...string) ([]string, error) {
	question := strings.Join(append([]string{command}, args...), " ")
	if _, err := fmt.Fprintln(p.stdin, question); err != nil {
		return nil, fmt.Errorf("ask %s manager: %w", p.impl, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	line, err := p.next(ctx)
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || fields[0] != command {
		return nil, fmt.Errorf("%s manager answered %q to %s", p.impl, line, command)
	}
	return fields[1:], nil
}

// heapInUse is the manager's Go heap in use after garbage collection.
func (p *managerProcess) heapInUse(ctx context.Context) (int64, error) {
	answer, err := p.ask(ctx, "heap")
	if err != nil {
		return 0, err
	}
	if len(answer) != 1 {
		return 0, fmt.Errorf("%s manager answered heap %q", p.impl, answer)
	}
	return strconv.ParseInt(answer[0], 10, 64)
}

// memory is the manager's heap in use after garbage collection and its
// resident set size, in bytes.
func (p *managerProcess) memory(ctx context.Context) (heap, rss int64, err error) {
	if heap, err = p.heapInUse(ctx); err != nil {
		return 0, 0, err
	}
	rss, err = p.rss()
	return heap, rss, err
}

// engaged is how many of names the manager has engaged.
func (p *managerProcess) engaged(ctx context.Context, names []string) (int, error) {
	got, err := p.which(ctx, names)
	return len(got), err
}

// which are those of names the manager has engaged.
func (p *managerProcess) which(ctx context.Context, names []string) ([]string, error) {
	return p.ask(ctx, "which", names...)
}

// kill kills the manager with SIGKILL, as a node failure would, and waits
// for it to exit.
func (p *managerProcess) kill() error {
	p.killed = true
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s manager: %w", p.impl, err)
	}
	<-p.exited
	return nil
}

// logged counts the lines of the manager's log so far that contain text.
func (p *managerProcess) logged(text string) (int, error) {
	raw, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(raw), text), nil
}

// rss is the manager process's resident set size in bytes.
func (p *managerProcess) rss() (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// cpu returns the CPU time the manager has used so far.
func (p *managerProcess) cpu() (time.Duration, error) {
	_, cpu, err := readProcStat(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	return cpu, err
}

// stop stops the manager and waits for it to exit, killing it after a minute.
func (p *managerProcess) stop() error {
	_ = p.stdin.Close()
	if p.killed {
		<-p.exited
		return nil
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s manager did not stop within a minute; killed", p.impl)
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s manager: %w", p.impl, p.waitErr)
	}
	return nil
}
