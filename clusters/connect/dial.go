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

// IPv6 prefixes whose addresses carry an IPv4 address that a translator or
// relay on the path delivers to: NAT64's well-known prefix (RFC 6052) and its
// local-use prefix (RFC 8215), SIIT's IPv4-translated addresses
// (::ffff:0:a.b.c.d, RFC 2765), the deprecated IPv4-compatible addresses
// (::a.b.c.d), 6to4 (RFC 3056) and Teredo (RFC 4380), whose relay delivers
// to the client's IPv4 address, stored inverted in the last 32 bits.
// IPv4-mapped addresses are unmapped before any check.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48")
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	ipv4Compatible = netip.MustParsePrefix("::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
)

// embeddedIPv4 are the IPv4 addresses ip may lead to through a translator:
// for the local-use NAT64 prefix, whose operator picks where the IPv4
// address sits, each of the places RFC 6052 allows a /48 or longer prefix
// (bits 64-71 skipped); elsewhere the one place its prefix defines. Other
// network-specific NAT64 prefixes cannot be told from plain addresses.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	at := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	switch {
	case nat64WellKnown.Contains(ip), ipv4Translated.Contains(ip), ipv4Compatible.Contains(ip):
		return []netip.Addr{at(12, 13, 14, 15)}
	case nat64LocalUse.Contains(ip):
		return []netip.Addr{at(6, 7, 9, 10), at(7, 9, 10, 11), at(9, 10, 11, 12), at(12, 13, 14, 15)}
	case sixToFour.Contains(ip):
		return []netip.Addr{at(2, 3, 4, 5)}
	case teredo.Contains(ip):
		client := at(12, 13, 14, 15).As4()
		for i := range client {
			client[i] ^= 0xff
		}
		return []netip.Addr{netip.AddrFrom4(client)}
	}
	return nil
}

// refusedAddress is whether ip, or an IPv4 address it carries to a
// translator, is in refusedPrefixes, and which of them is.
func refusedAddress(ip netip.Addr) (netip.Addr, bool) {
	for _, candidate := range append([]netip.Addr{ip}, embeddedIPv4(ip)...) {
		for _, p := range refusedPrefixes {
			if p.Contains(candidate) {
				return candidate, true
			}
		}
	}
	return netip.Addr{}, false
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
	refused, ok := refusedAddress(ip)
	switch {
	case !ok:
		return nil
	case refused != ip:
		return fmt.Errorf("%w: %s leads through NAT64, SIIT, 6to4, Teredo or IPv4 compatibility to %s, a link-local or cloud metadata address (--allow-link-local-members lifts this)", ErrDestinationRefused, ip, refused)
	}
	return fmt.Errorf("%w: %s is a link-local or cloud metadata address (--allow-link-local-members lifts this)", ErrDestinationRefused, ip)
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
