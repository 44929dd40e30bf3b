package app_test

import (
	"bytes"
	"sync"

	"github.com/widgethub/widgethub/internal/fleet"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// credentialSet is the suite's view of the credentials handed to the
// operator, kept by fleet (HandOver): the same set is searched for in the
// in-process manager's logs (TestMain) and in the log of every manager
// process the tests start (fleet.StartProcess, fleet.RunTests).
type credentialSet struct{}

func (credentialSet) add(secret string) { fleet.HandOver(secret) }

// addKubeconfig adds every token and private key of a kubeconfig.
func (credentialSet) addKubeconfig(kubeconfig []byte) { fleet.HandOverKubeconfig(kubeconfig) }

// foundIn returns the secrets that occur in text.
func (credentialSet) foundIn(text string) []string { return fleet.LeakedIn(text) }
