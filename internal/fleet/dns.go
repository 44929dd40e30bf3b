package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
)

// DNS is a DNS server on a loopback UDP port that answers A and AAAA
// questions for the names it was given, and NXDOMAIN for any other: a name
// that leads the hub where a test wants it, without touching the machine's
// resolver. Resolver gives a net.Resolver that asks it and nothing else.
type DNS struct {
	conn    net.PacketConn
	records map[string][]netip.Addr
	queries atomic.Int64
}

// NewDNS starts a DNS server for records, keyed by fully qualified names
// ("metadata.example.test."), in any case.
func NewDNS(records map[string][]netip.Addr) (*DNS, error) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &DNS{conn: conn, records: map[string][]netip.Addr{}}
	for name, addrs := range records {
		d.records[strings.ToLower(name)] = addrs
	}
	go d.serve()
	return d, nil
}

// Resolver is a pure-Go resolver whose every query goes to d, over UDP.
func (d *DNS) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", d.conn.LocalAddr().String())
	}}
}

// Queries is how many questions d answered.
func (d *DNS) Queries() int64 { return d.queries.Load() }

// Close stops d.
func (d *DNS) Close() { _ = d.conn.Close() }

func (d *DNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		if answer, err := d.answer(buf[:n]); err == nil {
			d.queries.Add(1)
			_, _ = d.conn.WriteTo(answer, from)
		}
	}
}

// DNS message layout (RFC 1035, 4.1): a 12-byte header, then the question:
// the name as length-prefixed labels ending in a zero byte, type and class.
const (
	dnsHeaderLen = 12
	dnsTypeA     = 1
	dnsTypeAAAA  = 28
	dnsClassIN   = 1
)

// answer is the response to query: its header and question, and one
// record per address of the asked type.
func (d *DNS) answer(query []byte) ([]byte, error) {
	if len(query) < dnsHeaderLen || binary.BigEndian.Uint16(query[4:]) != 1 {
		return nil, errors.New("not a query of one question")
	}
	var labels []string
	i := dnsHeaderLen
	for i < len(query) && query[i] != 0 {
		l := int(query[i])
		if l > 63 || i+1+l > len(query) {
			return nil, errors.New("malformed name")
		}
		labels = append(labels, string(query[i+1:i+1+l]))
		i += 1 + l
	}
	end := i + 1 + 4 // the zero byte, type and class
	if end > len(query) {
		return nil, errors.New("short question")
	}
	qtype := binary.BigEndian.Uint16(query[i+1:])
	addrs, known := d.records[strings.ToLower(strings.Join(labels, ".")+".")]

	msg := append([]byte(nil), query[:end]...)
	flags := uint16(0x8180) // a response, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(msg[2:], flags)
	binary.BigEndian.PutUint16(msg[8:], 0)  // no authority records
	binary.BigEndian.PutUint16(msg[10:], 0) // no additional records (the query's EDNS0 option is not echoed)
	count := uint16(0)
	for _, a := range addrs {
		rtype := uint16(dnsTypeAAAA)
		if a.Is4() {
			rtype = dnsTypeA
		}
		if rtype != qtype {
			continue
		}
		// The name as a pointer to the question's (offset 12), type,
		// class, a TTL of one second, and the address.
		msg = binary.BigEndian.AppendUint16(msg, 0xc000|dnsHeaderLen)
		msg = binary.BigEndian.AppendUint16(msg, rtype)
		msg = binary.BigEndian.AppendUint16(msg, dnsClassIN)
		msg = binary.BigEndian.AppendUint32(msg, 1)
		msg = binary.BigEndian.AppendUint16(msg, uint16(a.BitLen()/8))
		msg = append(msg, a.AsSlice()...)
		count++
	}
	binary.BigEndian.PutUint16(msg[6:], count)
	return msg, nil
}
