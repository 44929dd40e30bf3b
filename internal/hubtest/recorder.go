package hubtest

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// Recorder is a server that counts every connection and request it gets: a
// member that must never be contacted.
type Recorder struct {
	*httptest.Server
	Conns, Requests atomic.Int64
}

// NewRecorder starts a Recorder, serving TLS when tls is set, closed when
// t ends.
func NewRecorder(t *testing.T, tls bool) *Recorder {
	r := &Recorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.Requests.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	r.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.Conns.Add(1)
		}
	}
	if tls {
		r.StartTLS()
	} else {
		r.Start()
	}
	t.Cleanup(r.Close)
	return r
}

// CAPEM is the PEM of the Recorder's certificate, so that a kubeconfig that
// was allowed to connect would pass TLS verification.
func (r *Recorder) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Raw})
}

// WriteFile writes data into the file name of dir and returns its path.
func WriteFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
