package localcluster

import (
	"os"
	"path/filepath"
	"strconv"
)

// Audit makes kube-apiserver keep an audit log: a JSON line per request the
// policy records, written before the response is sent (blocking mode), so
// the log is complete for every answered request when it is read.
type Audit struct {
	// Policy is the audit policy (YAML, audit.k8s.io/v1 Policy); nil means
	// WritesPolicy.
	Policy []byte
	// Path is the log file; empty means Dir/logs/audit.log.
	Path string
}

// WritesPolicy records every write (create, update, patch, delete,
// deletecollection) with its request and response bodies, so that the
// object's uid, labels, owner references and content are in the log, and
// who wrote it (user, impersonated user). Pods and Nodes, written many
// times a second by the scheduler, kwok and the controllers, are recorded
// without bodies. Nothing is recorded for reads, events, leases, token and
// access reviews, or token requests.
var WritesPolicy = []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: None
  resources:
  - {group: "", resources: [events]}
  - {group: events.k8s.io, resources: [events]}
  - {group: coordination.k8s.io, resources: [leases]}
  - {group: authentication.k8s.io}
  - {group: authorization.k8s.io}
  - {group: "", resources: [serviceaccounts/token]}
- level: Metadata
  resources:
  - {group: "", resources: [pods, pods/status, pods/binding, pods/eviction, nodes, nodes/status]}
- level: RequestResponse
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`)

// auditArgs writes the policy into dir and returns kube-apiserver's flags
// and the log's path. The log is never rotated (lumberjack's size limit is
// set out of reach): a reader keeps its offset.
func (a *Audit) auditArgs(dir string) ([]string, string, error) {
	policy := a.Policy
	if policy == nil {
		policy = WritesPolicy
	}
	policyFile := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
		return nil, "", err
	}
	path := a.Path
	if path == "" {
		path = filepath.Join(dir, "logs", "audit.log")
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return []string{
		"--audit-policy-file=" + policyFile,
		"--audit-log-path=" + path,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=" + strconv.Itoa(1<<20), // MB: never reached
		"--audit-log-maxbackup=0",
		"--audit-log-maxage=0",
	}, path, nil
}
