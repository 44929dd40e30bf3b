package connect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrDestinationRefused is returned when a member's connection would go to a
// link-local or cloud metadata address.
var ErrDestinationRefused = errors.New("destination refused")

// refusedPrefixes are where a registration must not send the hub: link-local
// addresses, where clouds serve instance metadata and credentials
// (169.254.169.254 among them), and the metadata addresses outside that range
// (AWS over IPv6, Alibaba Cloud, Oracle Cloud).
var refusedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("192.0.0.192/32"),
}

// Dialer returns the dialer of every member connection. Unless allowLinkLocal,
// it refuses, at dial time, addresses in refusedPrefixes: the check sees the
// address actually connected to, so a DNS name or a redirect that leads there
// is refused too. Loopback and private addresses stay allowed.
func Dialer(allowLinkLocal bool) *net.Dialer {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !allowLinkLocal {
		d.Control = refuseDestination
	}
	return d
}

// refuseDestination is a net.Dialer Control function: address is the
// resolved ip:port about to be connected to.
func refuseDestination(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q", ErrDestinationRefused, address)
	}
	ip := ap.Addr().Unmap().WithZone("")
	for _, p := range refusedPrefixes {
		if p.Contains(ip) {
			return fmt.Errorf("%w: %s is a link-local or cloud metadata address (--allow-link-local-members lifts this)", ErrDestinationRefused, ip)
		}
	}
	return nil
}

// refuseHost refuses host, a name or an address, when it is or resolves
// (through the system's resolver) to an address in refusedPrefixes.
func refuseHost(ctx context.Context, host string) error {
	return refuseHostVia(ctx, net.DefaultResolver, host)
}

// refuseHostVia is refuseHost with resolver r: a name refused when any of
// its addresses is, since the proxy that resolves it again may pick any.
func refuseHostVia(ctx context.Context, r *net.Resolver, host string) error {
	addrs := []netip.Addr{}
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, ip)
	} else {
		resolved, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil // not resolvable here: the proxy decides (docs/registration.md)
		}
		addrs = resolved
	}
	for _, ip := range addrs {
		if err := refuseDestination("", netip.AddrPortFrom(ip, 0).String(), nil); err != nil {
			return err
		}
	}
	return nil
}
