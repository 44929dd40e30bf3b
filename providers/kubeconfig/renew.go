package kubeconfig

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/members"
)

// Renewing writes the registration Secret's kubeconfig: the hub may patch the
// Secrets of its registration namespace (it reads them already).
// +kubebuilder:rbac:groups="",namespace=widgethub-system,resources=secrets,verbs=patch

// renewal is how the engine renews the token of secret, which join marked
// renewable; nil for any other Secret.
func (s *Source) renewal(secret *corev1.Secret) *members.TokenRenewal {
	if secret.Annotations[registration.RenewTokenAnnotation] != "true" || s.writer == nil {
		return nil
	}
	return &members.TokenRenewal{
		BoundSecret: secret.Annotations[registration.TokenSecretAnnotation],
		Issued:      parseTokenIssued(secret.Annotations[registration.TokenIssuedAnnotation]),
	}
}

var _ members.TokenWriter = (*Source)(nil)

// WriteToken writes token into the kubeconfig of reg's Secret and issued into
// its registration.TokenIssuedAnnotation, provided the Secret is unchanged
// since it was read and only the token changes in the kubeconfig.
func (s *Source) WriteToken(ctx context.Context, reg *members.Registration, token string, issued members.TokenIssue, dryRun bool) ([sha256.Size]byte, error) {
	secret, ok := reg.Owner.(*corev1.Secret)
	if !ok || s.writer == nil {
		return [sha256.Size]byte{}, fmt.Errorf("%s is not a registration Secret this source writes", reg.Owner.GetName())
	}
	data := secret.Data[registration.SecretKey]
	doc, err := withToken(data, token)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	before, err := connect.RESTConfig(data, s.config)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	after, err := connect.RESTConfig(doc, s.config)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("the kubeconfig with the renewed token: %w", err)
	}
	if !before.SameServerAndIdentity(after) {
		return [sha256.Size]byte{}, errors.New("the kubeconfig with the renewed token differs in more than the token")
	}
	updated := secret.DeepCopy()
	updated.Data[registration.SecretKey] = doc
	if record := formatTokenIssued(issued); record != "" {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[registration.TokenIssuedAnnotation] = record
	}
	var opts []client.PatchOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := s.writer.Patch(ctx, updated, client.MergeFromWithOptions(secret, client.MergeFromWithOptimisticLock{}), opts...); err != nil {
		if apierrors.IsConflict(err) {
			err = members.ErrRegistrationChanged
		}
		return [sha256.Size]byte{}, fmt.Errorf("write the renewed token into Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return sha256.Sum256(doc), nil
}

// withToken is kubeconfig with the token of its current context's user
// replaced by token.
func withToken(kubeconfig []byte, token string) ([]byte, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%w: not a kubeconfig document", connect.ErrInvalidKubeconfig)
	}
	cur, err := connect.CurrentContext(raw)
	if err != nil {
		return nil, err
	}
	if cur.User == nil || cur.User.Token == "" {
		return nil, fmt.Errorf("%w: context %q has no token to renew", connect.ErrInvalidKubeconfig, cur.Name)
	}
	cur.User.Token = token
	return clientcmd.Write(*raw)
}

// formatTokenIssued is the value of registration.TokenIssuedAnnotation for issued; empty
// for a zero record.
func formatTokenIssued(issued members.TokenIssue) string {
	if issued.MintedAt.IsZero() {
		return ""
	}
	return fmt.Sprintf("minted=%s lifetime=%ds token=%s", issued.MintedAt.UTC().Format(time.RFC3339),
		int64(issued.Lifetime/time.Second), issued.Token)
}

// parseTokenIssued reads a registration.TokenIssuedAnnotation; a value it cannot read
// is no record.
func parseTokenIssued(value string) members.TokenIssue {
	var issued members.TokenIssue
	for field := range strings.FieldsSeq(value) {
		key, v, _ := strings.Cut(field, "=")
		switch key {
		case "minted":
			issued.MintedAt, _ = time.Parse(time.RFC3339, v)
		case "lifetime":
			seconds, err := strconv.ParseInt(strings.TrimSuffix(v, "s"), 10, 64)
			if err == nil && seconds > 0 && seconds < math.MaxInt64/int64(time.Second) {
				issued.Lifetime = time.Duration(seconds) * time.Second
			}
		case "token":
			issued.Token = v
		}
	}
	if issued.MintedAt.IsZero() || issued.Lifetime == 0 || issued.Token == "" {
		return members.TokenIssue{}
	}
	return issued
}
