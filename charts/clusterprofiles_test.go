package charts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/widgethub/widgethub/clusters/connect"
)

// providersValue is an access provider file, as clusterProfiles.providers
// takes it (--set-json).
const providersValue = `{"providers": [{"name": "widgethub-tokens", "execConfig": {
	"apiVersion": "client.authentication.k8s.io/v1", "command": "/plugins/widgethub-credential",
	"args": ["--token-dir=/etc/widgethub/tokens"], "provideClusterInfo": true}}]}`

// clusterProfileResources are what the hub reads and writes in the namespace
// of the ClusterProfiles, as "group/resource": the profiles, the
// MemberClusters it owns them and their status, the Events about them.
var clusterProfileResources = []string{
	"events.k8s.io/events",
	"multicluster.x-k8s.io/clusterprofiles",
	"multicluster.x-k8s.io/clusterprofiles/finalizers",
	"widgethub.io/memberclusters",
	"widgethub.io/memberclusters/status",
}

// TestChartTurnsClusterProfilesOn: with clusterProfiles.providers the
// manager gets --clusterprofile-provider-file naming a file that a
// read-only mount of the chart's ConfigMap holds, whose content the
// manager's own loader accepts as the values gave it, and the pods roll
// when it changes.
func TestChartTurnsClusterProfilesOn(t *testing.T) {
	rendered := template(t, "--set-json", "clusterProfiles.providers="+providersValue)
	checkTyped(t, rendered)
	o := index(rendered)
	d := into[appsv1.Deployment](t, o, "Deployment widgethub-system/widgethub")
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	file, ok := flagValue(c.Args, "--clusterprofile-provider-file")
	if !ok {
		t.Fatalf("no --clusterprofile-provider-file in %q", c.Args)
	}
	if _, ok := flagValue(c.Args, "--clusterprofile-namespace"); ok {
		t.Errorf("--clusterprofile-namespace without clusterProfiles.namespace: %q", c.Args)
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(file) {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly || mount.SubPath != "" {
		t.Fatalf("%s is not in a read-only mount of a whole volume: mounts %+v", file, c.VolumeMounts)
	}
	var volume *corev1.Volume
	for i, v := range pod.Volumes {
		if v.Name == mount.Name {
			volume = &pod.Volumes[i]
		}
	}
	if volume == nil || volume.ConfigMap == nil || len(volume.ConfigMap.Items) != 0 {
		t.Fatalf("the volume mounted at %s is not a whole ConfigMap: %+v", mount.MountPath, pod.Volumes)
	}
	cm := into[corev1.ConfigMap](t, o, "ConfigMap widgethub-system/"+volume.ConfigMap.Name)
	content, ok := cm.Data[filepath.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s: %v", cm.Name, filepath.Base(file), cm.Data)
	}

	// What the manager reads at start: connect.LoadAccessProviders, which
	// refuses what cluster-inventory-api's JSON loader would not read.
	local := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := connect.LoadAccessProviders(local)
	if err != nil {
		t.Fatalf("the manager would not start with the chart's provider file: %v\n%s", err, content)
	}
	if len(loaded.Providers) != 1 || loaded.Providers[0].Name != "widgethub-tokens" ||
		loaded.Providers[0].ExecConfig.Command != "/plugins/widgethub-credential" ||
		!slices.Equal(loaded.Providers[0].ExecConfig.Args, []string{"--token-dir=/etc/widgethub/tokens"}) ||
		!loaded.Providers[0].ExecConfig.ProvideClusterInfo {
		t.Errorf("the manager reads %+v from\n%s", loaded.Providers, content)
	}
	var got, want any
	if err := json.Unmarshal([]byte(content), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(providersValue), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("providers.json is\n%s\nnot the value\n%s", content, providersValue)
	}

	// The manager reads the file once: another content rolls the pods.
	sum := d.Spec.Template.Annotations["checksum/clusterprofiles"]
	other := strings.Replace(providersValue, "widgethub-tokens", "platform-tokens", 1)
	again := into[appsv1.Deployment](t, index(template(t, "--set-json", "clusterProfiles.providers="+other)), "Deployment widgethub-system/widgethub")
	if sum == "" || again.Spec.Template.Annotations["checksum/clusterprofiles"] == sum {
		t.Errorf("checksum/clusterprofiles %q, with other providers %q: want a pod template that changes with the file", sum, again.Spec.Template.Annotations["checksum/clusterprofiles"])
	}
}

// TestChartLeavesClusterProfilesOffByDefault: without providers nothing of
// them is rendered, and a namespace without providers is refused rather than
// ignored.
func TestChartLeavesClusterProfilesOffByDefault(t *testing.T) {
	for _, args := range [][]string{nil, {"--set", "registrationNamespace=fleet"}} {
		o := index(template(t, args...))
		for _, key := range o.keys() {
			if strings.Contains(key, "clusterprofiles") {
				t.Errorf("%v renders %s", args, key)
			}
		}
		d := into[appsv1.Deployment](t, o, "Deployment widgethub-system/widgethub")
		pod := d.Spec.Template.Spec
		for _, arg := range pod.Containers[0].Args {
			if strings.HasPrefix(arg, "--clusterprofile") {
				t.Errorf("%v passes %s", args, arg)
			}
		}
		if len(pod.Volumes) != 0 || len(pod.Containers[0].VolumeMounts) != 0 || len(pod.InitContainers) != 0 || len(d.Spec.Template.Annotations) != 0 {
			t.Errorf("%v: volumes %+v, mounts %+v, init containers %+v, annotations %v", args, pod.Volumes, pod.Containers[0].VolumeMounts, pod.InitContainers, d.Spec.Template.Annotations)
		}
	}
	_, stderr, err := helm(t, "template", "x", chartDir, "--set", "clusterProfiles.namespace=inventory")
	if err == nil || !strings.Contains(stderr, "clusterProfiles.namespace needs clusterProfiles.providers") {
		t.Errorf("clusterProfiles.namespace without providers: err %v, stderr:\n%s", err, stderr)
	}
}

// TestChartGrantsClusterProfilesInTheirNamespace: ClusterProfiles in
// another namespace than the registrations' get a Role there with the rules
// the generated Role (config/rbac/role.yaml, from the code's markers) has
// for what the hub does with them, and nothing else, sharded or not (the
// Leases of sharding stay in the registration namespace); in the
// registration namespace the generated Role serves and no other is rendered.
func TestChartGrantsClusterProfilesInTheirNamespace(t *testing.T) {
	generated := generatedRole(t)
	for _, tc := range []struct {
		name string
		args []string
		// extra are the rules beyond clusterProfileResources, none when nil.
		extra map[string][]string
	}{
		{"sharded", []string{"--set", "clusterProfiles.namespace=inventory"}, nil},
		{"leader-elected", []string{"--set", "clusterProfiles.namespace=inventory,sharding=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := index(template(t, append(tc.args, "--set-json", "clusterProfiles.providers="+providersValue)...))
			d := into[appsv1.Deployment](t, o, "Deployment widgethub-system/widgethub")
			if ns, _ := flagValue(d.Spec.Template.Spec.Containers[0].Args, "--clusterprofile-namespace"); ns != "inventory" {
				t.Errorf("--clusterprofile-namespace=%q, want inventory", ns)
			}
			role := into[rbacv1.Role](t, o, "Role inventory/widgethub-clusterprofiles")
			got := verbsByResource(role.Rules)
			want := map[string][]string{}
			for _, r := range clusterProfileResources {
				if generated[r] == nil {
					t.Fatalf("config/rbac/role.yaml grants nothing on %s", r)
				}
				want[r] = generated[r]
			}
			for r, verbs := range tc.extra {
				want[r] = verbs
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Role inventory/widgethub-clusterprofiles grants\n  %v\nwant\n  %v", got, want)
			}
			rb := into[rbacv1.RoleBinding](t, o, "RoleBinding inventory/widgethub-clusterprofiles")
			if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 ||
				rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != d.Spec.Template.Spec.ServiceAccountName || rb.Subjects[0].Namespace != "widgethub-system" {
				t.Errorf("RoleBinding inventory/widgethub-clusterprofiles: %+v %+v, want the manager's ServiceAccount bound to %s", rb.RoleRef, rb.Subjects, role.Name)
			}
		})
	}

	// The registration namespace, named or not: its Role has the rules already.
	for _, args := range [][]string{nil, {"--set", "clusterProfiles.namespace=widgethub-system"}} {
		o := index(template(t, append(args, "--set-json", "clusterProfiles.providers="+providersValue)...))
		for _, key := range o.keys() {
			if strings.HasPrefix(key, "Role") && !strings.HasPrefix(key, "Role widgethub-system/widgethub") && !strings.HasPrefix(key, "RoleBinding widgethub-system/widgethub") {
				t.Errorf("%v renders %s", args, key)
			}
		}
		if len(o.keys()) != len(index(template(t)).keys())+1 {
			t.Errorf("%v renders %v: want the default objects and the ConfigMap", args, o.keys())
		}
	}
}

// TestChartAppendsExtraVolumesAndInitContainers: extraVolumes,
// extraVolumeMounts and initContainers come after the chart's own.
func TestChartAppendsExtraVolumesAndInitContainers(t *testing.T) {
	o := index(template(t, "--set", "metrics.certSecret=metrics-tls", "--set-json", "clusterProfiles.providers="+providersValue,
		"--set-json", `extraVolumes=[{"name": "plugins", "emptyDir": {}}, {"name": "tokens", "secret": {"secretName": "member-tokens"}}]`,
		"--set-json", `extraVolumeMounts=[{"name": "plugins", "mountPath": "/plugins", "readOnly": true}, {"name": "tokens", "mountPath": "/etc/widgethub/tokens"}]`,
		"--set-json", `initContainers=[{"name": "credential-plugin", "image": "plugin:v1", "command": ["cp", "/plugin", "/plugins/"], "volumeMounts": [{"name": "plugins", "mountPath": "/plugins"}]}]`))
	pod := into[appsv1.Deployment](t, o, "Deployment widgethub-system/widgethub").Spec.Template.Spec
	if got, want := volumeNames(pod.Volumes), []string{"metrics-certs", "clusterprofile-providers", "plugins", "tokens"}; !slices.Equal(got, want) {
		t.Errorf("volumes %v, want %v", got, want)
	}
	if got, want := mountPaths(pod.Containers[0].VolumeMounts), []string{"/etc/widgethub/metrics-certs", "/etc/widgethub/clusterprofiles", "/plugins", "/etc/widgethub/tokens"}; !slices.Equal(got, want) {
		t.Errorf("mounts %v, want %v", got, want)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != "plugin:v1" || len(pod.InitContainers[0].VolumeMounts) != 1 {
		t.Errorf("init containers %+v", pod.InitContainers)
	}
	if pod.Volumes[3].Secret == nil || pod.Volumes[3].Secret.SecretName != "member-tokens" || !pod.Containers[0].VolumeMounts[2].ReadOnly {
		t.Errorf("the extra volumes and mounts are not as given: %+v %+v", pod.Volumes, pod.Containers[0].VolumeMounts)
	}
}

// flagValue is the value of the last --name=value of args.
func flagValue(args []string, name string) (string, bool) {
	value, found := "", false
	for _, arg := range args {
		if v, ok := strings.CutPrefix(arg, name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}

// generatedRole is the rules of the Role config/rbac/role.yaml, generated
// from the code's markers, by "group/resource".
func generatedRole(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := index(decode(t, string(data)))
	return verbsByResource(into[rbacv1.Role](t, o, "Role widgethub-system/widgethub").Rules)
}

// verbsByResource flattens rules into the sorted verbs of each
// "group/resource" (followed by its resourceNames, when a rule names some).
func verbsByResource(rules []rbacv1.PolicyRule) map[string][]string {
	out := map[string][]string{}
	for _, rule := range rules {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				key := g + "/" + r
				if len(rule.ResourceNames) > 0 {
					key += fmt.Sprint(rule.ResourceNames)
				}
				for _, v := range rule.Verbs {
					if !slices.Contains(out[key], v) {
						out[key] = append(out[key], v)
					}
				}
				sort.Strings(out[key])
			}
		}
	}
	return out
}
