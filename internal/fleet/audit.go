package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy records, at the Metadata level, every write, list and watch
// the API server completes, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection", "list", "watch"]
- level: None
`

// writeVerbs are the verbs Writes returns.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

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
	cp.Env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", cp.auditLog).
		Set("audit-log-mode", "blocking").
		Set("audit-log-maxsize", "1000")
	return nil
}

// Write is one write an API server completed, from its audit log.
type Write = Request

// Request is one request an API server completed, from its audit log.
type Request struct {
	User      string
	UserAgent string
	Verb      string
	// Resource is the resource, with its subresource: "widgets/status".
	Resource  string
	Namespace string
	Name      string
	Code      int
	// URI is the request's path and query.
	URI string
	// Received and Completed are when the API server received the request
	// and finished answering it.
	Received, Completed time.Time
}

type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent  string `json:"userAgent"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
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
// needs Options.AuditMembers (Options.AuditHub for the hub).
func (cp *ControlPlane) Writes() ([]Write, error) {
	return cp.requests(func(verb string) bool { return writeVerbs[verb] })
}

// Reads reads the lists and watches this control plane has completed (a
// watch once it ended) so far; it needs Options.AuditMembers.
func (cp *ControlPlane) Reads() ([]Request, error) {
	return cp.requests(func(verb string) bool { return verb == "list" || verb == "watch" })
}

// requests reads the requests whose verb matches from the audit log.
func (cp *ControlPlane) requests(match func(verb string) bool) ([]Request, error) {
	if cp.auditLog == "" {
		return nil, fmt.Errorf("control plane %q has no audit log", cp.Name)
	}
	f, err := os.Open(cp.auditLog)
	if err != nil {
		return nil, fmt.Errorf("audit log of %q: %w", cp.Name, err)
	}
	defer f.Close()
	var writes []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		if !match(e.Verb) {
			continue
		}
		w := Request{User: e.User.Username, UserAgent: e.UserAgent, Verb: e.Verb, URI: e.RequestURI, Received: e.RequestReceived, Completed: e.Stage}
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
