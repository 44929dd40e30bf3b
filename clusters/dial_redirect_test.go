package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// A member that answers 302 or 307 with a Location at a refused address,
// one of this machine's link-local addresses where a Recorder listens with
// the front's certificate (so that the hub would trust it), or the cloud
// metadata address, gets ErrRedirectRefused: the hub neither follows the
// redirect nor connects there, and sends the member each request once.
func TestRedirectsToRefusedAddressesAreNeitherFollowedNorConnected(t *testing.T) {
	h := startHostileMember(t)
	ctx := context.Background()
	addr := linkLocalAddress(t)
	rec, err := fleet.NewRecorderAt(net.JoinHostPort(addr, "0"), h.front.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	port := rec.URL()[strings.LastIndex(rec.URL(), ":")+1:]
	// The zone, which the Recorder's URL leaves out, escaped: [fe80::1%25eth0].
	linkLocal := "https://" + net.JoinHostPort(strings.Replace(addr, "%", "%25", 1), port)
	requests := map[string]func() error{
		"version": func() error { _, err := h.member.Version(ctx); return err },
		"list": func() error {
			return h.member.GetAPIReader().List(ctx, &v1alpha1.WidgetList{}, client.InNamespace("default"))
		},
		"token request": func() error {
			_, _, err := h.member.RenewToken(ctx, connect.TokenClaims{Namespace: "default", ServiceAccount: "hostile",
				IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)}, time.Hour)
			return err
		},
	}
	for _, location := range []string{linkLocal, "https://169.254.169.254:" + port, "http://169.254.169.254"} {
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			t.Run(fmt.Sprintf("%d to %s", code, location), func(t *testing.T) {
				h.front.Set(fleet.Fault{Answer: fleet.Redirect(code, location)})
				defer h.front.Clear()
				_, before := h.front.Requests()
				for what, do := range requests {
					if err := do(); !errors.Is(err, connect.ErrRedirectRefused) {
						t.Errorf("%s: %v, want ErrRedirectRefused", what, err)
					}
				}
				if _, after := h.front.Requests(); after-before != int64(len(requests)) {
					t.Errorf("the front answered %d requests, want %d: one each, none replayed", after-before, len(requests))
				}
				if n := rec.Connections(); n != 0 {
					t.Errorf("the hub opened %d connections to %s", n, linkLocal)
				}
			})
		}
	}
}

// linkLocalAddress is a link-local address of one of this machine's
// interfaces, with its zone ("fe80::fc:ff:fe00:1%eth0"), where a test can
// listen at an address the dial guard refuses.
func linkLocalAddress(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsLinkLocalUnicast() {
				if ipn.IP.To4() != nil {
					return ipn.IP.String()
				}
				return ipn.IP.String() + "%" + ifc.Name
			}
		}
	}
	t.Fatal("no interface of this machine has a link-local address: this test needs one to listen at an address the hub must not connect to")
	return ""
}
