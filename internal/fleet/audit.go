package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records, at the Metadata level, every write the API server
// completes, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func (cp *ControlPlane) configureAudit() error {
	dir, err := os.MkdirTemp("", "fleet-audit-"+cp.Name+"-")
	if err != nil {
		return fmt.Errorf("audit directory for %q: %w", cp.Name, err)
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return fmt.Errorf("audit policy for %q: %w", cp.Name, err)
	}
	cp.auditDir, cp.auditLog = dir, filepath.Join(dir, "audit.log")
	apiServer := &envtest.APIServer{}
	apiServer.Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", cp.auditLog).
		Set("audit-log-mode", "blocking").
		Set("audit-log-maxsize", "1000")
	cp.Env.ControlPlane.APIServer = apiServer
	return nil
}

// Write is one write an API server completed, from its audit log.
type Write struct {
	User      string
	UserAgent string
	Verb      string
	// Resource is the resource written, with its subresource: "widgets/status".
	Resource  string
	Namespace string
	Name      string
	Code      int
	// Received and Completed are when the API server received the request
	// and finished answering it.
	Received, Completed time.Time
}

type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	Verb      string `json:"verb"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	Stage           time.Time `json:"stageTimestamp"`
}

// Writes reads the writes this control plane has completed so far; it
// needs Options.AuditMembers.
func (cp *ControlPlane) Writes() ([]Write, error) {
	if cp.auditLog == "" {
		return nil, fmt.Errorf("control plane %q has no audit log", cp.Name)
	}
	f, err := os.Open(cp.auditLog)
	if err != nil {
		return nil, fmt.Errorf("audit log of %q: %w", cp.Name, err)
	}
	defer f.Close()
	var writes []Write
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		w := Write{User: e.User.Username, UserAgent: e.UserAgent, Verb: e.Verb, Received: e.RequestReceived, Completed: e.Stage}
		if e.ObjectRef != nil {
			w.Resource, w.Namespace, w.Name = e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name
			if e.ObjectRef.Subresource != "" {
				w.Resource += "/" + e.ObjectRef.Subresource
			}
		}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		writes = append(writes, w)
	}
	return writes, sc.Err()
}
