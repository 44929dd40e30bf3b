package charts_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// remoteBase is the config/default that docs/install.md's overlay names.
const remoteBase = "github.com/widgethub/widgethub/config/default?ref=v0.1.0"

// TestKustomizeClusterProfilesMatchTheChart renders docs/install.md's
// kustomize overlay for ClusterProfiles on this checkout's config/default,
// with a providers.json of the Helm example's providers, and the chart with
// that Helm example: both install the same objects (but the Namespace), the
// same manager (arguments and pod spec, the generated ConfigMap's hashed name
// aside), the same provider file and the same Role and RoleBinding in the
// ClusterProfiles' namespace.
func TestKustomizeClusterProfilesMatchTheChart(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl is not on PATH: %v", err)
	}
	overlay := docExamples(t, "install.md", "## ClusterProfiles with config/default", 2)
	helmExample := docExamples(t, "install.md", "### ClusterProfiles", 2)[0]
	base, err := filepath.Abs("../config/default")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(overlay[0], remoteBase) {
		t.Fatalf("the overlay's kustomization.yaml does not name %s:\n%s", remoteBase, overlay[0])
	}
	var values struct {
		ClusterProfiles struct {
			Providers map[string]any `json:"providers"`
		} `json:"clusterProfiles"`
	}
	if err := yaml.Unmarshal([]byte(helmExample), &values); err != nil {
		t.Fatal(err)
	}
	providers, err := json.MarshalIndent(values.ClusterProfiles.Providers, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes a base's path relative to the overlay.
	base, err = filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"kustomization.yaml":        strings.Replace(overlay[0], remoteBase, base, 1),
		"clusterprofiles-rbac.yaml": overlay[1],
		"providers.json":            string(providers),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize of docs/install.md's overlay: %v\n%s", err, out)
	}
	kust := index(decode(t, string(out)))
	delete(kust, "Namespace /widgethub-system")
	chart := index(template(t, "--values", writeFile(t, "values.yaml", helmExample)))

	// The generated ConfigMap: the chart's name and a hash of its content.
	const cmKey = "ConfigMap widgethub-system/widgethub-clusterprofiles"
	var generated string
	for _, key := range kust.keys() {
		if strings.HasPrefix(key, cmKey+"-") {
			generated = strings.TrimPrefix(key, "ConfigMap widgethub-system/")
			kust[cmKey] = kust[key]
			delete(kust, key)
		}
	}
	if got, want := kust.keys(), chart.keys(); !slices.Equal(got, want) {
		t.Fatalf("the overlay renders\n  %v\nthe chart\n  %v", got, want)
	}
	var kustFile, chartFile any
	if err := json.Unmarshal([]byte(into[corev1.ConfigMap](t, kust, cmKey).Data["providers.json"]), &kustFile); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(into[corev1.ConfigMap](t, chart, cmKey).Data["providers.json"]), &chartFile); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(kustFile, chartFile) {
		t.Errorf("providers.json: overlay %v, chart %v", kustFile, chartFile)
	}

	const deployment = "Deployment widgethub-system/widgethub"
	kd := into[appsv1.Deployment](t, kust, deployment)
	mounted := false
	for i, v := range kd.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && generated != "" && v.ConfigMap.Name == generated {
			kd.Spec.Template.Spec.Volumes[i].ConfigMap.Name, mounted = "widgethub-clusterprofiles", true
		}
	}
	// A new providers.json, a new name: the pods roll.
	if !mounted {
		t.Errorf("the overlay's Deployment mounts no ConfigMap named with a hash (generated: %q): %+v", generated, kd.Spec.Template.Spec.Volumes)
	}
	compareDeployments(t, into[appsv1.Deployment](t, chart, deployment), kd)

	const rbac = " fleet-inventory/widgethub-clusterprofiles"
	if got, want := verbsByResource(into[rbacv1.Role](t, kust, "Role"+rbac).Rules), verbsByResource(into[rbacv1.Role](t, chart, "Role"+rbac).Rules); !reflect.DeepEqual(got, want) {
		t.Errorf("Role%s: overlay %v, chart %v", rbac, got, want)
	}
	kb, cb := into[rbacv1.RoleBinding](t, kust, "RoleBinding"+rbac), into[rbacv1.RoleBinding](t, chart, "RoleBinding"+rbac)
	if !reflect.DeepEqual(kb.RoleRef, cb.RoleRef) || !reflect.DeepEqual(kb.Subjects, cb.Subjects) {
		t.Errorf("RoleBinding%s: overlay %+v %+v, chart %+v %+v", rbac, kb.RoleRef, kb.Subjects, cb.RoleRef, cb.Subjects)
	}
}
