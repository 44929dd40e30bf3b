package app_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
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

// credentialSet collects secrets given to the operator in kubeconfigs.
type credentialSet struct {
	mu      sync.Mutex
	secrets []string
}

func (c *credentialSet) add(secret string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.secrets = append(c.secrets, secret)
}

// addKubeconfig adds every token and private key of a kubeconfig: the key as
// PEM lines, so that a log quoting any line of it is caught.
func (c *credentialSet) addKubeconfig(kubeconfig []byte) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return
	}
	for _, user := range cfg.AuthInfos {
		if user.Token != "" {
			c.add(user.Token)
		}
		if encoded := base64.StdEncoding.EncodeToString(user.ClientKeyData); len(encoded) > 64 {
			c.add(encoded[20:64]) // as a kubeconfig file spells it
		}
		for _, line := range strings.Split(string(user.ClientKeyData), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				c.add(line)
			}
		}
	}
}

// foundIn returns the secrets that occur in text.
func (c *credentialSet) foundIn(text string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found []string
	for _, s := range c.secrets {
		if strings.Contains(text, s) {
			found = append(found, s)
		}
	}
	return found
}
