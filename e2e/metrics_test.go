//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// metricsReader is the ServiceAccount the tests scrape the manager as,
// bound to the ClusterRole config/rbac installs for scrapers.
const metricsReader = "e2e-metrics-reader"

// managerMetrics reads /metrics of the manager Pod pod as Prometheus does:
// over HTTPS (the certificate is self-signed), with the token of a
// ServiceAccount bound to widgethub-metrics-reader, through a port-forward
// to the Pod's port https.
func managerMetrics(ctx context.Context, hub *kube, pod string) ([]byte, error) {
	token, err := metricsToken(ctx, hub)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	forward := exec.CommandContext(ctx, "kubectl", "--kubeconfig", hub.kubeconfig, "-n", registrationsNS,
		"port-forward", "pod/"+pod, ":https")
	out, err := forward.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := forward.Start(); err != nil {
		return nil, fmt.Errorf("kubectl port-forward: %w", err)
	}
	defer func() {
		cancel()
		_ = forward.Wait()
	}()
	local, err := forwardedAddr(out)
	if err != nil {
		return nil, fmt.Errorf("kubectl port-forward to %s: %w", pod, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+local+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the manager's self-signed certificate
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("manager metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("manager metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("manager metrics: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

var forwarding = regexp.MustCompile(`^Forwarding from (127\.0\.0\.1:\d+) -> `)

// forwardedAddr reads kubectl port-forward's output up to the local address it listens on.
func forwardedAddr(out io.Reader) (string, error) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
			return m[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("it ended without forwarding")
}

// metricsToken is a token of the metricsReader ServiceAccount, which it
// creates and binds to widgethub-metrics-reader unless they exist.
func metricsToken(ctx context.Context, hub *kube) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: registrationsNS, Name: metricsReader}}
	if err := hub.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ServiceAccount %s: %w", metricsReader, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "widgethub-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: registrationsNS, Name: metricsReader}},
	}
	if err := hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("bind %s to widgethub-metrics-reader: %w", metricsReader, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := hub.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("token of %s: %w", metricsReader, err)
	}
	return tr.Status.Token, nil
}
