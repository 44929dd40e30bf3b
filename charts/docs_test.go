package charts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// docExamples are the YAML blocks of the section of the page docs/<page>
// that heading ("## Title" or "### Title") opens, up to the next heading of
// its level or above; t fails unless there are want of them.
func docExamples(t *testing.T, page, heading string, want int) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/%s has no section %q", page, heading)
	}
	level := heading[:strings.Index(heading, " ")]
	for l := len(level); l >= 2; l-- {
		section, _, _ = strings.Cut(section, "\n"+level[:l]+" ")
	}
	var blocks []string
	for {
		var block string
		if _, section, ok = strings.Cut(section, "```yaml\n"); !ok {
			break
		}
		// A block in a list item is indented, its fence too.
		block, section, _ = strings.Cut(section, "```\n")
		blocks = append(blocks, strings.TrimRight(block, " "))
	}
	if len(blocks) != want {
		t.Fatalf("docs/%s's section %q has %d YAML examples, want %d", page, heading, len(blocks), want)
	}
	return blocks
}

// writeFile writes content into a file called name in a directory of its
// own, and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDocsClusterProfileExamplesRender: the chart's ClusterProfile examples
// of docs/install.md (alone, and with the one for clusters without image
// volumes) and docs/registration.md's lint and render, turn ClusterProfiles
// on in fleet-inventory, mount only volumes of the pod, and run an exec
// plugin that one of the manager's mounts brings.
func TestDocsClusterProfileExamplesRender(t *testing.T) {
	install := docExamples(t, "install.md", "### ClusterProfiles", 2)
	// The first; the second is a ClusterProfile's status.
	registration := docExamples(t, "registration.md", "## How a ClusterProfile registers a member", 2)[:1]
	for name, examples := range map[string][]string{
		"install.md":                       install[:1],
		"install.md without image volumes": install,
		"registration.md":                  registration,
	} {
		var args []string
		for _, example := range examples {
			args = append(args, "--values", writeFile(t, "values.yaml", example))
		}
		if out := mustHelm(t, append([]string{"lint", "--strict", chartDir}, args...)...); !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("%s: helm lint:\n%s", name, out)
		}
		o := index(template(t, args...))
		pod := into[appsv1.Deployment](t, o, "Deployment widgethub-system/widgethub").Spec.Template.Spec
		c := pod.Containers[0]
		for _, container := range append(pod.InitContainers, c) {
			for _, m := range container.VolumeMounts {
				if !slices.Contains(volumeNames(pod.Volumes), m.Name) {
					t.Errorf("%s: container %s mounts %s, which is not a volume of the pod: %v", name, container.Name, m.Name, volumeNames(pod.Volumes))
				}
			}
		}
		if ns, _ := flagValue(c.Args, "--clusterprofile-namespace"); ns != "fleet-inventory" {
			t.Errorf("%s: --clusterprofile-namespace=%q", name, ns)
		}
		file := into[corev1.ConfigMap](t, o, "ConfigMap widgethub-system/widgethub-clusterprofiles").Data["providers.json"]
		var providers struct {
			Providers []struct {
				ExecConfig struct {
					Command string `json:"command"`
				} `json:"execConfig"`
			} `json:"providers"`
		}
		if err := json.Unmarshal([]byte(file), &providers); err != nil || len(providers.Providers) == 0 {
			t.Fatalf("%s: providers.json %v:\n%s", name, err, file)
		}
		for _, p := range providers.Providers {
			mounted := false
			for _, m := range c.VolumeMounts {
				mounted = mounted || strings.HasPrefix(p.ExecConfig.Command, m.MountPath+"/")
			}
			if !mounted {
				t.Errorf("%s: the manager runs %s, which none of its mounts brings: %+v", name, p.ExecConfig.Command, c.VolumeMounts)
			}
		}
	}
}
