package plugin

import (
	"io"

	"github.com/spf13/cobra"
)

// binaryName is the name shells know the plugin by: the executable kubectl
// finds on PATH.
const binaryName = "kubectl-widgethub"

// completionShells are the shells completion writes scripts for, each with
// cobra's generator of that shell's script.
var completionShells = map[string]func(root *cobra.Command, w io.Writer) error{
	"bash": func(root *cobra.Command, w io.Writer) error { return root.GenBashCompletionV2(w, true) },
	"zsh":  func(root *cobra.Command, w io.Writer) error { return root.GenZshCompletion(w) },
	"fish": func(root *cobra.Command, w io.Writer) error { return root.GenFishCompletion(w, true) },
}

func completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script for kubectl-widgethub",
		Long: `completion prints the script that completes the plugin's commands, flags
and arguments in bash, zsh or fish. The script completes the executable
kubectl-widgethub by asking it (its hidden __complete command), so it stays
right when the plugin changes:

  source <(kubectl widgethub completion bash)
  kubectl widgethub completion zsh > "${fpath[1]}/_kubectl-widgethub"
  kubectl widgethub completion fish > ~/.config/fish/completions/kubectl-widgethub.fish

For "kubectl widgethub <TAB>" kubectl's own completion (kubectl 1.26 and
later) runs an executable named kubectl_complete-widgethub from PATH; see
docs/plugin.md.`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return withCode(ExitUsage, "%w", err)
			}
			if _, ok := completionShells[args[0]]; !ok {
				return withCode(ExitUsage, "unsupported shell %q: pass bash, zsh or fish", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// The scripts name the root command: the executable's name, not
			// the "widgethub" kubectl shows.
			root := cmd.Root()
			use := root.Use
			root.Use = binaryName
			defer func() { root.Use = use }()
			return completionShells[args[0]](root, cmd.OutOrStdout())
		},
	}
}
