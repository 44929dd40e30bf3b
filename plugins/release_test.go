package plugins_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/internal/manifests"
)

// manifest is the part of a krew plugin manifest the test reads.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

const (
	version    = "v0.9.1-rc.1"
	releaseURL = "https://github.com/widgethub/widgethub/releases/download/" + version
)

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestReleaseWritesAKrewManifestForItsArchives runs the release script as
// make release does, into a temporary directory. At the lowest CPU priority:
// its four cross-builds are minutes of CPU on a cold build cache, and make
// test runs them beside the fleet tests (at the default priority they
// stretched a healthy member's longest gap between probes in
// TestHangingRegistrationsLeaveWorkers, then part of make test, from
// 2.8-3.1 s to 3.2-4.6 s, against a bound of 4 s).
func TestReleaseWritesAKrewManifestForItsArchives(t *testing.T) {
	dir := t.TempDir()
	dist, plugins := filepath.Join(dir, "dist"), filepath.Join(dir, "plugins")
	cmd := exec.Command("nice", "-n", "19", "../hack/release.sh", version, dist, plugins)
	cmd.Env = append(os.Environ(), "IMAGE_REPO=registry.example/widgethub")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, out)
	}

	// checksums.txt: every artifact, each sum right.
	sums := map[string]string{}
	data, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("checksums.txt line %q", line)
		}
		sums[f[1]] = f[0]
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var artifacts []string
	for _, e := range entries {
		if e.Name() != "checksums.txt" {
			artifacts = append(artifacts, e.Name())
		}
	}
	want := []string{
		"install.yaml",
		"kubectl-widgethub_" + version + "_darwin_amd64.tar.gz", "kubectl-widgethub_" + version + "_darwin_arm64.tar.gz",
		"kubectl-widgethub_" + version + "_linux_amd64.tar.gz", "kubectl-widgethub_" + version + "_linux_arm64.tar.gz",
		"widgethub-" + strings.TrimPrefix(version, "v") + ".tgz",
	}
	if !slices.Equal(artifacts, want) {
		t.Errorf("release wrote %v, want %v", artifacts, want)
	}
	for _, a := range artifacts {
		if got := sha256File(t, filepath.Join(dist, a)); sums[a] != got {
			t.Errorf("checksums.txt has %q for %s, its sha256 is %s", sums[a], a, got)
		}
	}
	if len(sums) != len(artifacts) {
		t.Errorf("checksums.txt lists %d files, the release has %d", len(sums), len(artifacts))
	}

	// The krew manifest: one platform per archive, its URI and sha256.
	data, err = os.ReadFile(filepath.Join(plugins, "widgethub.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("plugins/widgethub.yaml: %v\n%s", err, data)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "widgethub" ||
		m.Spec.Version != version || m.Spec.ShortDescription == "" {
		t.Errorf("manifest header: %+v", m)
	}
	seen := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		archive := "kubectl-widgethub_" + version + "_" + os + "_" + arch + ".tar.gz"
		seen[os+"/"+arch] = true
		if p.URI != releaseURL+"/"+archive {
			t.Errorf("%s/%s uri = %s, want %s/%s", os, arch, p.URI, releaseURL, archive)
		}
		if p.SHA256 != sums[archive] || p.SHA256 == "" {
			t.Errorf("%s/%s sha256 = %s, the archive's is %s", os, arch, p.SHA256, sums[archive])
		}
		if p.Bin != "kubectl-widgethub" || len(p.Files) == 0 || p.Files[0].From != "kubectl-widgethub" {
			t.Errorf("%s/%s bin %q, files %+v", os, arch, p.Bin, p.Files)
		}
		checkArchive(t, filepath.Join(dist, archive), os, arch)
	}
	if len(seen) != 4 || len(m.Spec.Platforms) != 4 {
		t.Errorf("manifest platforms %v, want linux and darwin on amd64 and arm64", seen)
	}

	// install.yaml pins the image; the chart carries the version.
	data, err = os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	images := 0
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			images++
			if img := c.(map[string]any)["image"]; img != "registry.example/widgethub:"+version {
				t.Errorf("install.yaml image %v, want registry.example/widgethub:%s", img, version)
			}
		}
	}
	if images != 1 {
		t.Errorf("install.yaml has %d manager containers, want 1", images)
	}
	chart, err := exec.Command("tar", "-xzOf", filepath.Join(dist, want[5]), "widgethub/Chart.yaml").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chart), "version: "+strings.TrimPrefix(version, "v")+"\n") || !strings.Contains(string(chart), "appVersion: "+version+"\n") {
		t.Errorf("packaged Chart.yaml:\n%s", chart)
	}
}

// checkArchive checks that the archive holds the plugin built for os/arch,
// and runs it when that is this machine's platform.
func checkArchive(t *testing.T, path, goos, goarch string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var bin []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "kubectl-widgethub" {
			if h.Mode&0o111 == 0 {
				t.Errorf("%s: kubectl-widgethub is not executable (%o)", path, h.Mode)
			}
			if bin, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bin == nil {
		t.Fatalf("%s holds no kubectl-widgethub", path)
	}
	switch goos {
	case "linux":
		e, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: not an ELF binary: %v", path, err)
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]; e.Machine != want {
			t.Errorf("%s: ELF machine %v, want %v", path, e.Machine, want)
		}
	case "darwin":
		mf, err := macho.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: not a Mach-O binary: %v", path, err)
		}
		if want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]; mf.Cpu != want {
			t.Errorf("%s: Mach-O cpu %v, want %v", path, mf.Cpu, want)
		}
	default:
		t.Errorf("%s: unexpected os %s", path, goos)
	}
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		return
	}
	exe := filepath.Join(t.TempDir(), "kubectl-widgethub")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "completion", "bash").Output()
	if err != nil || !strings.Contains(string(out), "kubectl-widgethub") {
		t.Errorf("the released plugin: completion bash: %v", err)
	}
}
