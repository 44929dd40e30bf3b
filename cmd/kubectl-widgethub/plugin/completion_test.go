package plugin_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// subcommands are what completion must offer after "kubectl-widgethub ".
var subcommands = []string{"clusters", "completion", "join", "unjoin", "widgets"}

func TestCompletionScripts(t *testing.T) {
	// Each shell's script registers itself for the executable and asks it
	// for candidates (cobra's hidden __complete command).
	for shell, marks := range map[string][]string{
		"bash": {"complete -o default -F __start_kubectl-widgethub kubectl-widgethub", "__complete"},
		"zsh":  {"#compdef kubectl-widgethub", "compdef _kubectl-widgethub kubectl-widgethub", "__complete"},
		"fish": {"complete -c kubectl-widgethub", "__complete"},
	} {
		t.Run(shell, func(t *testing.T) {
			r := mustRun(t, "completion", shell)
			for _, m := range marks {
				if !strings.Contains(r.stdout, m) {
					t.Errorf("the %s script does not contain %q", shell, m)
				}
			}
			if strings.Contains(r.stdout, "__start_widgethub") || strings.Contains(r.stdout, "_widgethub ") {
				t.Errorf("the %s script completes a command named widgethub, not kubectl-widgethub", shell)
			}
		})
	}
	for _, args := range [][]string{{"completion"}, {"completion", "pwsh"}, {"completion", "bash", "zsh"}} {
		if r := run(t, args...); r.code != plugin.ExitUsage {
			t.Errorf("kubectl widgethub %s: exit %d, want %d", strings.Join(args, " "), r.code, plugin.ExitUsage)
		}
	}

	// What the scripts ask: candidates for the subcommand, then for the shell.
	r := mustRun(t, "__complete", "")
	for _, c := range subcommands {
		if !strings.Contains(r.stdout, "\n"+c+"\t") && !strings.HasPrefix(r.stdout, c+"\t") {
			t.Errorf("__complete \"\" does not offer %s:\n%s", c, r.stdout)
		}
	}
	if r := mustRun(t, "__complete", "completion", ""); !strings.HasPrefix(r.stdout, "bash\nzsh\nfish\n") {
		t.Errorf("__complete completion \"\" = %q, want bash, zsh and fish", r.stdout)
	}
}

// pluginOnPath returns a directory holding the built kubectl-widgethub, and
// the environment that puts it first on PATH.
func pluginOnPath(t *testing.T) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Symlink(built(t, "cmd/kubectl-widgethub"), filepath.Join(dir, "kubectl-widgethub")); err != nil {
		t.Fatal(err)
	}
	return dir, append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestBashCompletesTheSubcommands sources the bash script in bash, with the
// built kubectl-widgethub on PATH, and completes the way bash does on <TAB>.
func TestBashCompletesTheSubcommands(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is not on PATH: %v", err)
	}
	dir, env := pluginOnPath(t)
	script := filepath.Join(dir, "completion.bash")
	if err := os.WriteFile(script, []byte(mustRun(t, "completion", "bash").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	// The script calls bash-completion's _get_comp_words_by_ref; where that
	// package is not installed a stand-in sets the same four variables.
	const complete = `
if [ -r /usr/share/bash-completion/bash_completion ]; then
  source /usr/share/bash-completion/bash_completion
fi
if ! type _get_comp_words_by_ref >/dev/null 2>&1; then
  _get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
__start_kubectl-widgethub 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
`
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"kubectl-widgethub", ""}, subcommands},
		{[]string{"kubectl-widgethub", "un"}, []string{"unjoin"}},
		{[]string{"kubectl-widgethub", "completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"kubectl-widgethub", "join", "alpha", "--member-k"}, []string{"--member-kubeconfig"}},
	} {
		cmd := exec.Command(bash, append([]string{"-c", complete, "bash", script}, tc.words...)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, stderr.String())
		}
		got := slices.DeleteFunc(strings.Split(strings.TrimSpace(string(out)), "\n"), func(s string) bool { return s == "" || s == "help" })
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("bash completes %q to %q, want %q", strings.Join(tc.words, " "), got, tc.want)
		}
	}
}

// TestKubectlCompletesThePlugin checks docs/plugin.md's kubectl_complete-widgethub:
// kubectl's own completion of "kubectl widgethub ..." reaches the plugin.
func TestKubectlCompletesThePlugin(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not on PATH: %v", err)
	}
	dir, env := pluginOnPath(t)
	forward := "#!/usr/bin/env sh\nexec kubectl-widgethub __complete \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-widgethub"), []byte(forward), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectl, "__complete", "widgethub", "un")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl __complete widgethub un: %v", err)
	}
	if !strings.HasPrefix(string(out), "unjoin\t") {
		t.Errorf("kubectl __complete widgethub un = %q, want unjoin first", out)
	}
}
