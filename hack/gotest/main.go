// Command gotest runs `go test -json` and prints what a person reads of a
// plain `go test`: a line per package, and the whole output of every test
// that failed. Unlike `go test`, it also fails the run when
//
//   - a test named with -want did not run (a test renamed behind a -run
//     filter otherwise passes as "[no tests to run]");
//   - any test skipped while CI=true (a skip in CI would pass for a check
//     that never ran);
//
// and it ends with each package's elapsed time, slowest first.
//
//	go run ./hack/gotest [-want TestA,TestB] -- [go test flags] packages
//
// With -want and no -run among the go test flags, it runs exactly the wanted
// tests.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

func main() {
	want := flag.String("want", "", "comma-separated top-level tests that must run")
	flag.Parse()
	args := flag.Args()
	wanted := splitNonEmpty(*want)
	if len(wanted) > 0 && !slices.ContainsFunc(args, func(a string) bool { return a == "-run" || strings.HasPrefix(a, "-run=") }) {
		args = append([]string{"-run", "^(" + strings.Join(wanted, "|") + ")$"}, args...)
	}
	os.Exit(run(append([]string{"test", "-json"}, args...), wanted, os.Getenv("CI") == "true", os.Stdout))
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run runs go with args, reports as the package doc says and returns the
// exit code.
func run(args, wanted []string, ci bool, out io.Writer) int {
	cmd := exec.Command(goCommand(), args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(out, "gotest:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(out, "gotest:", err)
		return 2
	}
	r := newReport(out)
	r.read(stdout)
	code := 0
	if err := cmd.Wait(); err != nil {
		code = 1
		if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() > 0 {
			code = exit.ExitCode()
		}
	}
	return r.finish(code, wanted, ci)
}

func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// report keeps each running test's output until it is known to have failed.
type report struct {
	out      io.Writer
	output   map[string]*strings.Builder // by package and test
	ran      map[string]bool             // top-level tests that ran, by name
	skipped  []string
	packages map[string]float64 // elapsed seconds
}

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[string]*strings.Builder{}, ran: map[string]bool{}, packages: map[string]float64{}}
}

func (r *report) read(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event (go test prints some build errors as text).
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.handle(e)
	}
}

func (r *report) handle(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
	case "output":
		b := r.output[key]
		if b == nil {
			b = &strings.Builder{}
			r.output[key] = b
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		buf := r.output[key]
		delete(r.output, key)
		if e.Test == "" {
			r.packages[e.Package] = e.Elapsed
			if e.Action == "fail" {
				// A test that never ended (a timeout's panic) failed with its package.
				for k, b := range r.output {
					if strings.HasPrefix(k, e.Package+" ") {
						fmt.Fprint(r.out, b.String())
						delete(r.output, k)
					}
				}
				if buf != nil {
					fmt.Fprint(r.out, buf.String())
				}
			} else if buf != nil {
				// The package's closing line ("ok ...", "?  ... [no test files]").
				fmt.Fprint(r.out, lastLine(buf.String()))
			}
			return
		}
		if !strings.Contains(e.Test, "/") {
			r.ran[e.Test] = true
		}
		switch e.Action {
		case "fail":
			if buf != nil {
				fmt.Fprint(r.out, buf.String())
			}
		case "skip":
			r.skipped = append(r.skipped, e.Package+" "+e.Test)
			if buf != nil {
				fmt.Fprint(r.out, buf.String())
			}
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s + "\n"
}

func (r *report) finish(code int, wanted []string, ci bool) int {
	if len(r.packages) > 0 {
		fmt.Fprintln(r.out, "package times (go test -json), slowest first:")
		names := make([]string, 0, len(r.packages))
		for p := range r.packages {
			names = append(names, p)
		}
		sort.Slice(names, func(i, j int) bool { return r.packages[names[i]] > r.packages[names[j]] })
		for _, p := range names {
			fmt.Fprintf(r.out, "  %8s  %s\n", (time.Duration(r.packages[p] * float64(time.Second))).Round(100*time.Millisecond), p)
		}
	}
	for _, w := range wanted {
		if !r.ran[w] {
			fmt.Fprintf(r.out, "FAIL: %s did not run (renamed, or filtered out)\n", w)
			code = max(code, 1)
		}
	}
	if ci && len(r.skipped) > 0 {
		fmt.Fprintf(r.out, "FAIL: %d tests skipped with CI=true, where every check must run:\n", len(r.skipped))
		for _, s := range r.skipped {
			fmt.Fprintln(r.out, "  "+s)
		}
		code = max(code, 1)
	}
	return code
}
