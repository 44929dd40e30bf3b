package plugin_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/reconcilers/widget"
)

// What the member admission policy says when it refuses, rule by rule
// (config/member-rbac/admission-policy.yaml).
const (
	fenceNotOurs          = "widgethub updates only Deployments that already are its own"
	fenceOwnerKept        = "widgethub keeps the owner of its Deployments"
	fenceOwnerReference   = "widgethub writes only Deployments with one owner reference, the controller reference to the Widget of their name"
	fencePodLabels        = "widgethub's pods carry exactly the labels"
	fencePodAnnotations   = "widgethub's pods carry no annotations"
	fenceReplicas         = "widgethub writes at most 1000 replicas"
	fenceOneContainer     = "widgethub's pods run one container, widget"
	fenceHostNamespaces   = "widgethub's pods share no host namespace"
	fenceVolumes          = "widgethub's pods have no volumes"
	fenceServiceAccount   = "widgethub's pods run as their namespace's default ServiceAccount"
	fenceUnprivileged     = "widgethub's pods are unprivileged"
	fenceContainerOptions = "widgethub's container sets no command"
	fencePodOptions       = "widgethub's pods set no node, scheduling"
	fenceRollout          = "widgethub does not pause its Deployments"
)

// With the token join minted, the hub's Widget reconciler itself (run here
// against the member) creates, scales, changes and recreates its Deployments;
// the same token cannot take over a foreign Deployment, swap an owner, or
// create or turn a Widget's Deployment into anything the reconciler does not
// write. Each refusal is the admission policy's, for the rule at stake.
func TestFenceAdmitsWhatTheReconcilerWritesOnly(t *testing.T) {
	alpha := testFleet.Member("alpha")
	unjoinCleanup(t, "alpha", "alpha")
	join(t, "alpha", "alpha")
	thief, _ := registrationClient(t, "alpha")
	hub := startReconciler(t, "alpha")

	cart := adminWidget(t, alpha, "shop", "cart")
	t.Run("the reconciler's writes pass", func(t *testing.T) {
		checkReconcilerWrites(t, hub, alpha, cart)
	})
	t.Run("no foreign Deployment taken over", func(t *testing.T) {
		checkNoTakeOver(t, alpha, thief)
	})
	t.Run("the owner stays and the shape holds on update", func(t *testing.T) {
		checkUpdatesKeepOwnerAndShape(t, hub, alpha, thief, cart)
	})
	t.Run("only the reconciler's shape is created", func(t *testing.T) {
		checkCreateShape(t, hub, alpha, thief)
	})
}

// checkReconcilerWrites runs every write the reconciler makes for w: create,
// scale (to the Widget API's maximum too), image change, after a kubectl
// rollout restart, and a deleted Deployment recreated.
func checkReconcilerWrites(t *testing.T, hub *widget.Reconciler, cp *fleet.ControlPlane, w *v1alpha1.Widget) {
	ctx := context.Background()
	reconcileUntil(t, hub, cp, w, "create", func(d *appsv1.Deployment) bool { return true })
	for _, replicas := range []int32{3, v1alpha1.MaxWidgetReplicas, 0} {
		editWidget(t, cp, w, func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To(replicas) })
		reconcileUntil(t, hub, cp, w, fmt.Sprintf("scale to %d", replicas), func(d *appsv1.Deployment) bool {
			return *d.Spec.Replicas == replicas
		})
	}
	const image = "registry.k8s.io/pause:3.9"
	editWidget(t, cp, w, func(w *v1alpha1.Widget) { w.Spec.Image = image })
	reconcileUntil(t, hub, cp, w, "image change", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == image
	})

	// kubectl rollout restart, by the member's admin, annotates the pod template.
	restart := client.RawPatch(types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-25T23:00:00Z"}}}}}`))
	if err := cp.Client.Patch(ctx, &appsv1.Deployment{ObjectMeta: w.ObjectMeta}, restart); err != nil {
		t.Fatal(err)
	}
	editWidget(t, cp, w, func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To[int32](2) })
	reconcileUntil(t, hub, cp, w, "scale after kubectl rollout restart", func(d *appsv1.Deployment) bool {
		return *d.Spec.Replicas == 2
	})

	old := &appsv1.Deployment{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(w), old); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	reconcileUntil(t, hub, cp, w, "recreate a deleted Deployment", func(d *appsv1.Deployment) bool { return d.UID != old.UID })
}

// checkNoTakeOver tries, as the hub, to make a foreign Deployment a Widget's.
func checkNoTakeOver(t *testing.T, cp *fleet.ControlPlane, thief client.Client) {
	ctx := context.Background()
	labels := map[string]string{"app": "ingress"}
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ingress", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "registry.k8s.io/ingress-nginx/controller:v1.12.0"}}},
			},
		},
	}
	if err := cp.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), foreign) })
	// The best disguise: a Widget of the Deployment's name, its labels and
	// its controller reference; and a Widget UID that does not exist, which
	// would have the garbage collector delete the Deployment.
	disguise := adminWidget(t, cp, "shop", "ingress")
	for what, patch := range map[string]string{
		"label, owner and image": fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"widgethub","app.kubernetes.io/name":"widget","app.kubernetes.io/instance":"ingress"},`+
			`"ownerReferences":[{"apiVersion":"widgethub.io/v1alpha1","kind":"Widget","name":"ingress","uid":%q,"controller":true,"blockOwnerDeletion":true}]},`+
			`"spec":{"template":{"spec":{"containers":[{"name":"controller","image":"evil.example/miner:1"}]}}}}`, disguise.UID),
		"an owner Widget that does not exist": fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"widgethub"},`+
			`"ownerReferences":[{"apiVersion":"widgethub.io/v1alpha1","kind":"Widget","name":"ingress","uid":%q,"controller":true}]}}`, uuid.NewUUID()),
	} {
		err := thief.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ingress"}},
			client.RawPatch(types.MergePatchType, []byte(patch)))
		wantFenced(t, "take over a foreign Deployment: "+what, err, fenceNotOurs)
	}
	after := &appsv1.Deployment{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(foreign), after); err != nil {
		t.Fatal(err)
	}
	if len(after.OwnerReferences) != 0 || after.Spec.Template.Spec.Containers[0].Image != foreign.Spec.Template.Spec.Containers[0].Image ||
		!maps.Equal(after.Labels, labels) {
		t.Errorf("the foreign Deployment changed: owners %v, labels %v, image %s",
			after.OwnerReferences, after.Labels, after.Spec.Template.Spec.Containers[0].Image)
	}
}

// checkUpdatesKeepOwnerAndShape tries, as the hub, to change the owner of
// w's Deployment, or to make it privileged; the reconciler then still writes it.
func checkUpdatesKeepOwnerAndShape(t *testing.T, hub *widget.Reconciler, cp *fleet.ControlPlane, thief client.Client, w *v1alpha1.Widget) {
	ctx := context.Background()
	reconcileUntil(t, hub, cp, w, "create", func(d *appsv1.Deployment) bool { return true })
	for _, tc := range []struct{ what, patch, rule string }{
		{"an owner UID that does not exist", fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"widgethub.io/v1alpha1","kind":"Widget","name":%q,"uid":%q,"controller":true}]}}`,
			w.Name, uuid.NewUUID()), fenceOwnerKept},
		{"no owner", `{"metadata":{"ownerReferences":null}}`, fenceOwnerKept},
		{"privileged", `{"spec":{"template":{"spec":{"containers":[{"name":"widget","image":"evil.example/miner:1","securityContext":{"privileged":true}}]}}}}`, fenceUnprivileged},
		{"host network", `{"spec":{"template":{"spec":{"hostNetwork":true}}}}`, fenceHostNamespaces},
		{"another selector", `{"spec":{"template":{"metadata":{"labels":{"app":"payments"}}}}}`, fencePodLabels},
		// An image a thief set would keep running after the hub's next write.
		{"paused", `{"spec":{"paused":true}}`, fenceRollout},
		{"rollouts held back ten minutes", `{"spec":{"minReadySeconds":599}}`, fenceRollout},
		{"a finalizer", `{"metadata":{"finalizers":["example.com/keep"]}}`, fenceRollout},
	} {
		err := thief.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}},
			client.RawPatch(types.MergePatchType, []byte(tc.patch)))
		wantFenced(t, "update a Widget's Deployment: "+tc.what, err, tc.rule)
	}
	editWidget(t, cp, w, func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To[int32](4) })
	reconcileUntil(t, hub, cp, w, "scale after the refused updates", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 4 })
}

// checkCreateShape creates, as the hub, a Widget's Deployment exactly as the
// reconciler wrote it but for one change: each is refused, and unchanged
// it is admitted, so each refusal is the change's.
func checkCreateShape(t *testing.T, hub *widget.Reconciler, cp *fleet.ControlPlane, thief client.Client) {
	ctx := context.Background()
	w := adminWidget(t, cp, "shop", "dressed")
	var written *appsv1.Deployment
	reconcileUntil(t, hub, cp, w, "create", func(d *appsv1.Deployment) bool { written = d; return true })
	if err := cp.Client.Delete(ctx, written); err != nil {
		t.Fatal(err)
	}
	dressed := func(change func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: written.Namespace, Name: written.Name,
				Labels: maps.Clone(written.Labels), OwnerReferences: slices.Clone(written.OwnerReferences)},
			Spec: *written.Spec.DeepCopy(),
		}
		change(d)
		return d
	}
	pod := func(d *appsv1.Deployment) *corev1.PodSpec { return &d.Spec.Template.Spec }
	container := func(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[0] }
	for _, tc := range []struct {
		what   string
		change func(*appsv1.Deployment)
		rule   string
	}{
		{"privileged", func(d *appsv1.Deployment) {
			container(d).SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, fenceUnprivileged},
		{"allowPrivilegeEscalation", func(d *appsv1.Deployment) {
			container(d).SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}
		}, fenceUnprivileged},
		{"an added capability", func(d *appsv1.Deployment) {
			container(d).SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
		}, fenceUnprivileged},
		{"unconfined seccomp", func(d *appsv1.Deployment) {
			pod(d).SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, fenceUnprivileged},
		{"host network", func(d *appsv1.Deployment) { pod(d).HostNetwork = true }, fenceHostNamespaces},
		{"host PID", func(d *appsv1.Deployment) { pod(d).HostPID = true }, fenceHostNamespaces},
		{"host IPC", func(d *appsv1.Deployment) { pod(d).HostIPC = true }, fenceHostNamespaces},
		{"a hostPath volume", func(d *appsv1.Deployment) {
			pod(d).Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			container(d).VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		}, fenceVolumes},
		{"a serviceAccountName", func(d *appsv1.Deployment) { pod(d).ServiceAccountName = "cluster-admin" }, fenceServiceAccount},
		{"an init container", func(d *appsv1.Deployment) {
			pod(d).InitContainers = []corev1.Container{{Name: "init", Image: "evil.example/miner:1"}}
		}, fenceOneContainer},
		{"a second container", func(d *appsv1.Deployment) {
			pod(d).Containers = append(pod(d).Containers, corev1.Container{Name: "sidecar", Image: "evil.example/miner:1"})
		}, fenceOneContainer},
		{"a hostPort", func(d *appsv1.Deployment) {
			container(d).Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}, fenceContainerOptions},
		{"env from a Secret", func(d *appsv1.Deployment) {
			container(d).EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
		}, fenceContainerOptions},
		{"a nodeName", func(d *appsv1.Deployment) { pod(d).NodeName = "control-plane" }, fencePodOptions},
		{"a toleration", func(d *appsv1.Deployment) {
			pod(d).Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, fencePodOptions},
		{"another Service's pod label", func(d *appsv1.Deployment) { d.Spec.Template.Labels["app"] = "payments" }, fencePodLabels},
		{"an unconfined AppArmor annotation", func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/widget": "unconfined"}
		}, fencePodAnnotations},
		{"a pod finalizer", func(d *appsv1.Deployment) { d.Spec.Template.Finalizers = []string{"example.com/never"} }, fencePodAnnotations},
		{"more replicas than a Widget may ask for", func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](v1alpha1.MaxWidgetReplicas + 1)
		}, fenceReplicas},
		{"paused", func(d *appsv1.Deployment) { d.Spec.Paused = true }, fenceRollout},
		{"minReadySeconds", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 599 }, fenceRollout},
		{"a finalizer", func(d *appsv1.Deployment) { d.Finalizers = []string{"example.com/keep"} }, fenceRollout},
		{"an owner of another name", func(d *appsv1.Deployment) { d.OwnerReferences[0].Name = "other" }, fenceOwnerReference},
		{"a second owner", func(d *appsv1.Deployment) {
			d.OwnerReferences = append(d.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: uuid.NewUUID()})
		}, fenceOwnerReference},
	} {
		d := dressed(tc.change)
		err := thief.Create(ctx, d)
		wantFenced(t, "create a Widget's Deployment with "+tc.what, err, tc.rule)
		if err == nil { // keep the next cases apart
			_ = cp.Client.Delete(ctx, d)
		}
	}
	if !strings.Contains(fenceReplicas, fmt.Sprint(v1alpha1.MaxWidgetReplicas)) {
		t.Errorf("the policy's replica bound (%q) is not the Widget API's maximum %d", fenceReplicas, v1alpha1.MaxWidgetReplicas)
	}
	// What a member's mutating admission may add to harden every Deployment
	// passes, as the Deployment the reconciler wrote does.
	hardened := dressed(func(d *appsv1.Deployment) {
		pod(d).AutomountServiceAccountToken = ptr.To(false)
		pod(d).SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		container(d).SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, ReadOnlyRootFilesystem: ptr.To(true)}
		container(d).Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	})
	if err := thief.Create(ctx, hardened); err != nil {
		t.Errorf("create, as the hub, the reconciler's Deployment hardened by a member's mutating admission: %v", err)
	}
	_ = cp.Client.Delete(ctx, hardened)
	if err := thief.Create(ctx, dressed(func(*appsv1.Deployment) {})); err != nil {
		t.Errorf("create, as the hub, the Deployment the reconciler wrote: %v", err)
	}
}

// wantFenced fails unless err is the member admission policy's denial for rule.
func wantFenced(t *testing.T, what string, err error, rule string) {
	t.Helper()
	if !isPolicyDenial(err) || !strings.Contains(err.Error(), rule) {
		t.Errorf("%s, as the hub: err = %v\nwant the admission policy's denial: %s...", what, err, rule)
	}
}

// oneMember is the hub with one engaged member.
type oneMember struct{ cluster.Cluster }

func (m oneMember) GetCluster(context.Context, multicluster.ClusterName) (cluster.Cluster, error) {
	return m.Cluster, nil
}

// startReconciler runs the hub's Widget reconciler against the member of the
// registration name, with its kubeconfig, as the hub reads it.
func startReconciler(t *testing.T, name string) *widget.Reconciler {
	t.Helper()
	cfg, err := connect.RESTConfig(registrationSecret(t, name).Data[registration.SecretKey], connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(cfg.REST, func(o *cluster.Options) { o.Scheme = clusters.NewScheme() })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := cl.Start(ctx); err != nil {
			t.Errorf("member cache: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &widget.Reconciler{Clusters: oneMember{cl}}
}

// reconcileUntil reconciles w until its Deployment, read from cp, is done:
// the reconciler reads a cache that may lag. Any reconcile error fails the
// test: the reconciler's writes must all pass.
func reconcileUntil(t *testing.T, hub *widget.Reconciler, cp *fleet.ControlPlane, w *v1alpha1.Widget, what string, done func(*appsv1.Deployment) bool) {
	t.Helper()
	ctx := context.Background()
	req := mcreconcile.Request{ClusterName: multicluster.ClusterName(cp.Name), Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := hub.Reconcile(ctx, req); err != nil {
			t.Fatalf("%s: the reconciler's write was refused: %v", what, err)
		}
		d := &appsv1.Deployment{}
		err := cp.Client.Get(ctx, client.ObjectKeyFromObject(w), d)
		if err == nil && done(d) {
			return
		}
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the Deployment is not there within 20s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// editWidget changes w's spec in cp, as the member's user would.
func editWidget(t *testing.T, cp *fleet.ControlPlane, w *v1alpha1.Widget, edit func(*v1alpha1.Widget)) {
	t.Helper()
	ctx := context.Background()
	current := &v1alpha1.Widget{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(w), current); err != nil {
		t.Fatal(err)
	}
	edit(current)
	if err := cp.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
}

// Every field of a pod template is either checked by the member admission
// policy or allowed here, with the reason: a field that a new Kubernetes
// version adds fails this test until someone decides. Every field the policy
// names exists (a misspelt one would never be set, and never refused).
func TestFenceNamesEveryPodField(t *testing.T) {
	policy, _, err := plugin.MemberPolicy()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, v := range policy.Spec.Variables {
		text.WriteString(v.Expression + "\n")
	}
	for _, v := range policy.Spec.Validations {
		text.WriteString(v.Expression + "\n")
	}
	for _, tc := range []struct {
		variable string
		of       reflect.Type
		// allowed with any value: set by the API server's defaults, or
		// settings that only restrict the pod, which a member's mutating
		// admission may add.
		allowed []string
	}{
		{"deployment", reflect.TypeFor[appsv1.DeploymentSpec](), []string{
			// checked as object.spec's
			"replicas", "selector", "template",
			// Recreate or RollingUpdate: the pods run the hub's image just the same
			"strategy",
			// defaulted; neither holds a rollout back
			"revisionHistoryLimit", "progressDeadlineSeconds",
		}},
		{"pod", reflect.TypeFor[corev1.PodSpec](), []string{
			"restartPolicy",                 // Always is the only value a Deployment takes
			"terminationGracePeriodSeconds", // defaulted
			"schedulerName",                 // defaulted
		}},
		{"container", reflect.TypeFor[corev1.Container](), []string{
			"imagePullPolicy", "terminationMessagePath", "terminationMessagePolicy", // defaulted
		}},
		{"podSecurity", reflect.TypeFor[corev1.PodSecurityContext](), []string{
			"runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "fsGroupChangePolicy",
			"supplementalGroups", "supplementalGroupsPolicy", "seLinuxChangePolicy",
		}},
		{"containerSecurity", reflect.TypeFor[corev1.SecurityContext](), []string{
			"runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem",
		}},
	} {
		fields := jsonFields(tc.of)
		named := map[string]bool{}
		for _, m := range regexp.MustCompile(`variables\.`+tc.variable+`\.(\w+)`).FindAllStringSubmatch(text.String(), -1) {
			named[m[1]] = true
			if !slices.Contains(fields, m[1]) {
				t.Errorf("the policy names variables.%s.%s, which %s does not have", tc.variable, m[1], tc.of.Name())
			}
		}
		for _, f := range fields {
			if !named[f] && !slices.Contains(tc.allowed, f) {
				t.Errorf("%s.%s is neither checked by the member admission policy (variables.%s.%s) nor allowed here", tc.of.Name(), f, tc.variable, f)
			}
		}
	}
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(of reflect.Type) []string {
	var names []string
	for i := range of.NumField() {
		if name, _, _ := strings.Cut(of.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
