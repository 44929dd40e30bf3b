package app_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/widgethub/widgethub/cmd/widgethub/app"
)

// documentedFlag is a row of the flags table of docs/manager.md.
type documentedFlag struct {
	name string
	// defaultValue is the documented default, as the flag package prints it;
	// hasDefault is false when the table gives none or describes it in words.
	defaultValue string
	hasDefault   bool
}

var backquoted = regexp.MustCompile("`([^`]*)`")

// managerDoc is docs/manager.md.
func managerDoc(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "manager.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// documentedFlags reads the flags table of docs/manager.md: each row names
// one or more flags (`--a` / `--b`) and their defaults in the same order
// (`1` / `2`); a default cell with no backquoted value documents none.
func documentedFlags(t *testing.T) map[string]documentedFlag {
	t.Helper()
	_, table, found := strings.Cut(managerDoc(t), "\n## Flags\n")
	if !found {
		t.Fatal("docs/manager.md has no ## Flags section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	flags := map[string]documentedFlag{}
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			t.Fatalf("docs/manager.md: a flags row without name, default and meaning: %q", line)
		}
		var names, defaults []string
		for _, m := range backquoted.FindAllStringSubmatch(cells[0], -1) {
			names = append(names, strings.TrimPrefix(m[1], "--"))
		}
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			defaults = append(defaults, m[1])
		}
		if len(defaults) != 0 && len(defaults) != len(names) {
			t.Fatalf("docs/manager.md: %d flags and %d defaults in %q", len(names), len(defaults), line)
		}
		for i, name := range names {
			f := documentedFlag{name: name}
			if len(defaults) > 0 {
				f.defaultValue, f.hasDefault = defaults[i], true
			}
			if _, dup := flags[name]; dup {
				t.Fatalf("docs/manager.md documents --%s twice", name)
			}
			flags[name] = f
		}
	}
	if len(flags) == 0 {
		t.Fatal("docs/manager.md: no flag in the ## Flags table")
	}
	return flags
}

// The flags the manager binds (app.Options.BindFlags with the defaults of
// app.DefaultOptions) are the ones docs/manager.md's table lists, with the
// defaults it gives. Flags that the table lists but that are not the app's
// own (zap's --zap-*) are checked on the binary.
func TestFlagsAreTheDocumentedOnes(t *testing.T) {
	documented := documentedFlags(t)
	opts := app.DefaultOptions()
	fs := flag.NewFlagSet("widgethub", flag.ContinueOnError)
	opts.BindFlags(fs)
	bound := map[string]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) { bound[f.Name] = f })

	for name, doc := range documented {
		if strings.Contains(name, "*") {
			continue // a family of flags of a library, such as --zap-*
		}
		f, ok := bound[name]
		if !ok {
			t.Errorf("docs/manager.md documents --%s, which the manager does not have", name)
			continue
		}
		if doc.hasDefault && doc.defaultValue != f.DefValue {
			t.Errorf("--%s: docs/manager.md says the default is %q, the flag's is %q", name, doc.defaultValue, f.DefValue)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(bound)) {
		if _, ok := documented[name]; !ok {
			t.Errorf("--%s (%s) is not in docs/manager.md's flags table", name, bound[name].Usage)
		}
	}
}

// helpFlag is a flag as the binary's --help lists it.
type helpFlag struct {
	name, usage string
}

// parseHelp reads the flags of a Go flag package usage message.
func parseHelp(out string) map[string]helpFlag {
	flags := map[string]helpFlag{}
	var current string
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			current = strings.Fields(rest)[0]
			flags[current] = helpFlag{name: current}
			continue
		}
		if f, ok := flags[current]; ok && strings.HasPrefix(line, "    \t") {
			f.usage += strings.TrimSpace(line) + " "
			flags[current] = f
		}
	}
	return flags
}

// The built manager binary's --help exits 0 and lists exactly the flags of
// docs/manager.md (its table, --kubeconfig and zap's --zap-* flags) with
// the documented defaults.
func TestBinaryHelpListsTheDocumentedFlags(t *testing.T) {
	bin := buildManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("widgethub --help: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	help := parseHelp(stdout.String() + stderr.String())
	if len(help) == 0 {
		t.Fatalf("widgethub --help lists no flag:\n%s%s", stdout.String(), stderr.String())
	}

	documented := documentedFlags(t)
	if !strings.Contains(managerDoc(t), "`--kubeconfig`") {
		t.Error("docs/manager.md does not mention --kubeconfig")
	}
	documented["kubeconfig"] = documentedFlag{name: "kubeconfig"}
	isDocumented := func(name string) bool {
		for pattern := range documented {
			if ok, _ := filepath.Match(pattern, name); ok {
				return true
			}
		}
		return false
	}
	for _, name := range slices.Sorted(maps.Keys(help)) {
		if !isDocumented(name) {
			t.Errorf("widgethub --help lists -%s, which docs/manager.md does not document", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		doc := documented[name]
		matched := slices.DeleteFunc(slices.Collect(maps.Keys(help)), func(h string) bool {
			ok, _ := filepath.Match(name, h)
			return !ok
		})
		if len(matched) == 0 {
			t.Errorf("docs/manager.md documents --%s; widgethub --help does not list it", name)
			continue
		}
		if !doc.hasDefault || strings.Contains(name, "*") {
			continue
		}
		usage := help[name].usage
		switch doc.defaultValue {
		case "", "0", "false", "0s":
			// The flag package prints no default for zero values.
			if strings.Contains(usage, "(default ") {
				t.Errorf("-%s: docs/manager.md says the default is %q; --help says %q", name, doc.defaultValue, usage)
			}
		default:
			want := []string{fmt.Sprintf("(default %s)", doc.defaultValue), fmt.Sprintf("(default %q)", doc.defaultValue)}
			if !strings.Contains(usage, want[0]) && !strings.Contains(usage, want[1]) {
				t.Errorf("-%s: docs/manager.md says the default is %q; --help says %q", name, doc.defaultValue, usage)
			}
		}
	}
}
