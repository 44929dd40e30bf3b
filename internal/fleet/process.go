package fleet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// builds are the commands of this module that this process built, once
// each, into one directory that RunTests removes.
var builds struct {
	mu   sync.Mutex
	dir  string
	done map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// ManagerBinary builds cmd/widgethub, once per process, and returns the
// binary's path, for tests that run the manager as processes of their own
// (to kill or stop one for real).
func ManagerBinary() (string, error) { return Built("cmd/widgethub") }

// CredentialPlugin builds cmd/widgethub-credential, the access provider of
// ClusterProfile members in tests and the demo, once per process.
func CredentialPlugin() (string, error) { return Built("cmd/widgethub-credential") }

// Built builds the command in the module's directory dir, once per process,
// and returns the binary's path. RunTests removes it when the tests end.
func Built(dir string) (string, error) {
	builds.mu.Lock()
	if builds.done == nil {
		builds.done = map[string]*build{}
	}
	b, ok := builds.done[dir]
	if !ok {
		b = &build{}
		builds.done[dir] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		builds.mu.Lock()
		if builds.dir == "" {
			builds.dir, b.err = os.MkdirTemp("", "widgethub-builds-")
		}
		out := builds.dir
		builds.mu.Unlock()
		if b.err != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		bin := filepath.Join(out, filepath.Base(dir))
		cmd := exec.Command("go", "build", "-o", bin, "./"+dir)
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
		if output, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./%s: %w\n%s", dir, err, output)
			return
		}
		b.path = bin
	})
	return b.path, b.err
}

// removeBuilds removes what Built built, if anything.
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Process is a program started by StartProcess, its output in a log file.
type Process struct {
	// LogPath is the file its stdout and stderr go to.
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// leaked says which credentials handed over its log holds.
	leaked error
}

// StartProcess starts bin with args, its output going to logPath. The
// process is killed when the calling process dies. When it exits, its log
// is searched for the credentials handed over (HandOver): see
// LeakedCredentials.
func StartProcess(bin, logPath string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &Process{LogPath: logPath, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = logFile.Close()
		p.leaked = searchLog(logPath)
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process exited (nil for status 0); call it after Exited.
func (p *Process) Err() error { return p.waitErr }

// ExitCode is the process's exit code; call it after Exited.
func (p *Process) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Signal sends sig to the process unless it has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return errors.New("the process has exited")
	default:
		return p.cmd.Process.Signal(sig)
	}
}

// Kill kills the process, stopped or not, and waits for it to exit.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGKILL)
	<-p.exited
}

// LeakedCredentials is an error when the process's log holds credentials
// handed over (HandOver), saying how many; call it after Exited.
func (p *Process) LeakedCredentials() error { return p.leaked }

// Log is what the process wrote so far.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.LogPath)
	return string(data)
}
