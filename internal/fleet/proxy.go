package fleet

import (
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/widgethub/widgethub/clusters/connect"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy forwards TCP connections from a fixed loopback address to a target
// address. Taking it Down closes the listener and every connection, as a dead
// API server would; Up listens again on the same address; Hang makes it
// accept connections and never answer. Tests point kubeconfigs at it to make a
// member fail and return.
type Proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	hang  bool
}

// NewProxy starts a proxy to target on a free loopback port.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Down closes the listener and every open connection.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Up listens again on the proxy's address.
func (p *Proxy) Up() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy up on %s: %w", p.addr, err)
	}
	p.serve(ln)
	return nil
}

// Hang makes new connections hang (accepted, never answered) while on.
func (p *Proxy) Hang(on bool) {
	p.mu.Lock()
	p.hang = on
	p.mu.Unlock()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			hang := p.hang
			p.mu.Unlock()
			if !hang {
				go p.forward(c)
			}
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

// EditKubeconfig returns kubeconfig with the cluster and user of its current
// context changed by edit; its credentials count as handed over (HandOver).
func EditKubeconfig(kubeconfig []byte, edit func(cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo)) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	cur, err := connect.CurrentContext(cfg)
	if err != nil {
		return nil, err
	}
	if cur.User == nil {
		return nil, fmt.Errorf("kubeconfig's current context %q has no user", cur.Name)
	}
	edit(cur.Cluster, cur.User)
	out, err := clientcmd.Write(*cfg)
	if err == nil {
		HandOverKubeconfig(out) // what edit put in, a token say
	}
	return out, err
}
