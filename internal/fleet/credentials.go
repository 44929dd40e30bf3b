package fleet

import (
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// The credentials tests hand to the operator: the fleet's own (every control
// plane's admin kubeconfig, the tokens it mints or forges, the tokens it
// puts in a front's kubeconfig) and whatever a test adds with HandOver or
// HandOverKubeconfig. No log of the operator may hold one: every Process
// started by StartProcess is searched when it exits, and RunTests fails the
// run when one was found (the log of an operator in the test process is
// searched by its suite with LeakedIn).
var handedOver struct {
	mu      sync.Mutex
	secrets map[string]bool
	// leaks say which processes' logs held one.
	leaks []error
}

// HandOver records secrets given to the operator under test.
func HandOver(secrets ...string) {
	handedOver.mu.Lock()
	defer handedOver.mu.Unlock()
	if handedOver.secrets == nil {
		handedOver.secrets = map[string]bool{}
	}
	for _, s := range secrets {
		if s != "" {
			handedOver.secrets[s] = true
		}
	}
}

// HandOverKubeconfig records every token and private key of a kubeconfig:
// the key as each of its PEM lines and as a kubeconfig file spells it
// (base64), so that a log quoting any part of it is caught.
func HandOverKubeconfig(kubeconfig []byte) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return
	}
	for _, user := range cfg.AuthInfos {
		HandOver(user.Token, user.Password)
		if encoded := base64.StdEncoding.EncodeToString(user.ClientKeyData); len(encoded) > 64 {
			HandOver(encoded[20:64])
		}
		for _, line := range strings.Split(string(user.ClientKeyData), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				HandOver(line)
			}
		}
	}
}

// LeakedIn returns the credentials handed over that occur in text.
func LeakedIn(text string) []string {
	handedOver.mu.Lock()
	defer handedOver.mu.Unlock()
	var found []string
	for s := range handedOver.secrets {
		if strings.Contains(text, s) {
			found = append(found, s)
		}
	}
	return found
}

// searchLog searches the log of a process that exited for credentials, and
// returns an error that says what it found.
func searchLog(logPath string) error {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	leaked := LeakedIn(string(data))
	if len(leaked) == 0 {
		return nil
	}
	err = fmt.Errorf("the log %s holds %d credentials handed to the operator (e.g. one starting %.6q)", logPath, len(leaked), leaked[0])
	handedOver.mu.Lock()
	handedOver.leaks = append(handedOver.leaks, err)
	handedOver.mu.Unlock()
	return err
}

// processLeaks are the errors of the processes whose logs held credentials.
func processLeaks() []error {
	handedOver.mu.Lock()
	defer handedOver.mu.Unlock()
	return slices.Clone(handedOver.leaks)
}
