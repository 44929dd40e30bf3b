package connect_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// The addresses the names of these tests resolve to, through a real DNS
// server (fleet.DNS) that the member dialer asks through its own Resolver
// field (the product leaves it nil: the system's resolver).
var namedAddresses = map[string][]netip.Addr{
	"metadata.widgethub.test.":    {netip.MustParseAddr("169.254.169.254")},
	"metadata-v6.widgethub.test.": {netip.MustParseAddr("fd00:ec2::254")},
	"alibaba.widgethub.test.":     {netip.MustParseAddr("100.100.100.200")},
	"link-local.widgethub.test.":  {netip.MustParseAddr("169.254.0.1"), netip.MustParseAddr("fe80::1")},
	// 169.254.169.254 through NAT64's well-known prefix (an IPv6-only
	// network with DNS64 answers this for the metadata address)
	"nat64.widgethub.test.": {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
	// both an allowed address (the test's listener) and a refused one
	"both.widgethub.test.":   {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
	"member.widgethub.test.": {netip.MustParseAddr("127.0.0.1")},
}

func startDNS(t *testing.T) *fleet.DNS {
	t.Helper()
	dns, err := fleet.NewDNS(namedAddresses)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	return dns
}

// countingListener accepts connections at an allowed address and counts them.
type countingListener struct {
	net.Listener
	mu       sync.Mutex
	accepted int
}

func listenCounting(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.accepted++
			l.mu.Unlock()
			_ = c.Close()
		}
	}()
	return l
}

func (l *countingListener) port() string {
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func (l *countingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// A name that resolves only to refused addresses is refused when dialled,
// before any connection (ErrDestinationRefused, not a timeout: this machine
// has no route that answers there); a name of an allowed address connects;
// --allow-link-local-members lifts the refusal.
func TestDialerRefusesNamesThatResolveToRefusedAddresses(t *testing.T) {
	dns := startDNS(t)
	member := listenCounting(t)
	for _, tc := range []struct {
		name    string
		refused bool
	}{
		{"metadata.widgethub.test.", true},
		{"metadata-v6.widgethub.test.", true},
		{"alibaba.widgethub.test.", true},
		{"link-local.widgethub.test.", true},
		{"nat64.widgethub.test.", true},
		{"member.widgethub.test.", false},
	} {
		d := connect.Dialer(false)
		d.Resolver = dns.Resolver()
		asked, accepted := dns.Queries(), member.count()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(tc.name, member.port()))
		cancel()
		if dns.Queries() == asked {
			t.Fatalf("%s: the test's DNS server was not asked", tc.name)
		}
		if conn != nil {
			_ = conn.Close()
		}
		if tc.refused {
			if !errors.Is(err, connect.ErrDestinationRefused) {
				t.Errorf("%s: dial error %v, want ErrDestinationRefused", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v, want a connection", tc.name, err)
		} else {
			connected := func(context.Context) (bool, error) { return member.count() == accepted+1, nil }
			if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, connected); err != nil {
				t.Errorf("%s: the allowed address never saw the connection: %v", tc.name, err)
			}
		}
	}

	allowed := connect.Dialer(true)
	allowed.Resolver = dns.Resolver()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := allowed.DialContext(ctx, "tcp", "metadata.widgethub.test.:80"); errors.Is(err, connect.ErrDestinationRefused) {
		t.Errorf("refused although link-local members are allowed: %v", err)
	}
}

// A name that resolves to both an allowed and a refused address connects
// only at the allowed one: when it listens, the one connection goes there;
// when it does not, the dialer tries the refused one too and the guard
// refuses it, as the guard itself (observed, not replaced) reports.
func TestDialerConnectsANameOfAllowedAndRefusedAddressesOnlyAtTheAllowed(t *testing.T) {
	dns := startDNS(t)
	member := listenCounting(t)

	d := connect.Dialer(false)
	d.Resolver = dns.Resolver()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("both.widgethub.test.", member.port()))
	if err != nil {
		t.Fatalf("a name with an allowed address: %v", err)
	}
	if got := conn.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.1" {
		t.Errorf("connected to %s, want the allowed 127.0.0.1", got)
	}
	_ = conn.Close()

	// The allowed address refuses this port (closed just now), so the
	// dialer goes on to the refused address, whatever their order.
	closed := listenCounting(t)
	port := closed.port()
	_ = closed.Close()
	var mu sync.Mutex
	verdicts := map[string]error{}
	guard := d.Control
	d.Control = func(network, address string, c syscall.RawConn) error {
		var err error
		if guard != nil {
			err = guard(network, address, c)
		}
		mu.Lock()
		verdicts[address] = err
		mu.Unlock()
		return err
	}
	if conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("both.widgethub.test.", port)); err == nil {
		_ = conn.Close()
		t.Fatalf("connected to port %s, which nothing listens at", port)
	}
	mu.Lock()
	defer mu.Unlock()
	refused := net.JoinHostPort("169.254.169.254", port)
	if err, tried := verdicts[refused]; !tried {
		t.Errorf("the dialer did not try %s: %v", refused, verdicts)
	} else if !errors.Is(err, connect.ErrDestinationRefused) {
		t.Errorf("the guard let the dialer connect to %s: %v", refused, err)
	}
}

// Through a proxy the dialer sees only the proxy: the guard resolves the
// member's host itself and refuses it when any of its addresses is refused,
// since the proxy resolves it again and may pick any; a name that does not
// resolve is left to the proxy.
func TestProxiedNamesThatResolveToRefusedAddresses(t *testing.T) {
	dns := startDNS(t)
	for _, tc := range []struct {
		host    string
		refused bool
	}{
		{"metadata.widgethub.test.", true},
		{"metadata-v6.widgethub.test.", true},
		{"link-local.widgethub.test.", true},
		{"both.widgethub.test.", true},
		{"member.widgethub.test.", false},
		{"unknown.widgethub.test.", false},
	} {
		asked := dns.Queries()
		err := connect.RefuseHostVia(context.Background(), dns.Resolver(), tc.host)
		if dns.Queries() == asked {
			t.Fatalf("%s: the test's DNS server was not asked", tc.host)
		}
		if refused := errors.Is(err, connect.ErrDestinationRefused); refused != tc.refused {
			t.Errorf("%s: %v, want refused=%v", tc.host, err, tc.refused)
		}
	}
}
