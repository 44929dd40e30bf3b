package kubeconfig

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/members"
)

// withToken changes the current context's token and nothing else: the hub
// reads the result as the same server and identity, so that the member swaps
// the token in place.
func TestWithTokenChangesOnlyTheToken(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["m"] = &clientcmdapi.Cluster{Server: "https://member.example:6443", CertificateAuthorityData: []byte("ca"), TLSServerName: "member"}
	cfg.AuthInfos["hub"] = &clientcmdapi.AuthInfo{Token: "old-token"}
	cfg.AuthInfos["other"] = &clientcmdapi.AuthInfo{Token: "other-token"}
	cfg.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "hub", Namespace: "ns"}
	cfg.Contexts["o"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "other"}
	cfg.CurrentContext = "m"
	doc, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := withToken(doc, "new-token")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.Replace(renewed, []byte("new-token"), []byte("old-token"), 1), doc) {
		t.Errorf("more than the token changed:\n%s\nwas\n%s", renewed, doc)
	}
	before, err := connect.RESTConfig(doc, connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := connect.RESTConfig(renewed, connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !before.SameServerAndIdentity(after) || after.REST.BearerToken != "new-token" {
		t.Errorf("the renewed kubeconfig is not the same server and identity with the new token")
	}

	cfg.AuthInfos["hub"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	doc, err = clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withToken(doc, "new-token"); !errors.Is(err, connect.ErrInvalidKubeconfig) {
		t.Errorf("a kubeconfig without a token: err = %v, want ErrInvalidKubeconfig", err)
	}
}

// The hub's record of a token it minted reads back as written; anything
// else in the annotation is no record.
func TestTokenIssuedAnnotation(t *testing.T) {
	issued := members.TokenIssue{MintedAt: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Lifetime: 600 * time.Second, Token: members.TokenDigest("t")}
	value := formatTokenIssued(issued)
	if want := "minted=2026-11-25T12:00:00Z lifetime=600s token=" + issued.Token; value != want {
		t.Fatalf("formatted %q, want %q", value, want)
	}
	if got := parseTokenIssued(value); got != issued || !got.Describes("t") || got.Describes("u") {
		t.Errorf("parsed %+v, want %+v, describing t only", got, issued)
	}
	for _, bad := range []string{"", "minted=yesterday lifetime=600s token=ab", "minted=2026-11-25T12:00:00Z lifetime=-1s token=ab",
		"minted=2026-11-25T12:00:00Z token=ab", "minted=2026-11-25T12:00:00Z lifetime=600s", "lifetime=99999999999999999999s"} {
		if got := parseTokenIssued(bad); got != (members.TokenIssue{}) {
			t.Errorf("%q parsed as %+v", bad, got)
		}
	}
	if formatTokenIssued(members.TokenIssue{}) != "" {
		t.Error("a zero record is written")
	}
}
