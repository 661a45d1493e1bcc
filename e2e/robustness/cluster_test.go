package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/hack/localcluster"
)

// The cluster: the local control plane with the real workload controllers,
// kube-scheduler and kwok's fake nodes (hack/localcluster, Options.Workloads),
// and an audit log of every write (Options.Audit). Kontinue's CRDs and the
// test's Widget kind are installed before the controller-manager starts.

// widgetCRD is the test's own kind: anything under spec, a status
// subresource that the test's widget controller (and forgers) write.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.robustness.kontinue.dev}
spec:
  group: robustness.kontinue.dev
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// kontinueUser is the user Kontinue authenticates as: the ServiceAccount
// of deploy/install.yaml, with a token, holding exactly the rights of the
// install.
const kontinueUser = "system:serviceaccount:kontinue-system:kontinue"

func startCluster(ctx context.Context, root, dir string) (*localcluster.Cluster, error) {
	bins, err := install(ctx, root)
	if err != nil {
		return nil, err
	}
	return localcluster.Start(ctx, localcluster.Options{
		BinDir:    bins.BinDir,
		Dir:       dir,
		Log:       os.Stderr,
		Workloads: &localcluster.Workloads{KwokBinary: bins.Kwok, Nodes: 2},
		Audit:     &localcluster.Audit{},
		BeforeControllers: func(ctx context.Context, c *localcluster.Cluster) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
			if err != nil {
				return err
			}
			objs, err := crds.All()
			if err != nil {
				return err
			}
			var w unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(widgetCRD), &w.Object); err != nil {
				return err
			}
			return crds.Install(ctx, dynamic.NewForConfigOrDie(cfg), "robustness", append(objs, &w), 2*time.Minute)
		},
	})
}

// install builds the control plane and kwok when missing (not Tekton,
// which the suite does not run).
func install(ctx context.Context, root string) (localcluster.Installed, error) {
	var in localcluster.Installed
	for _, s := range []struct {
		script string
		out    *string
	}{{"install-controlplane.sh", &in.BinDir}, {"install-kwok.sh", &in.Kwok}} {
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", s.script))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return in, fmt.Errorf("hack/%s: %w", s.script, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		*s.out = strings.TrimSpace(lines[len(lines)-1])
	}
	return in, nil
}

// api is the API server over plain HTTP, as the admin or as a user the
// admin impersonates. Raw bytes in and out: objects 10,000 levels deep
// and integers past 2^53 go through untouched.
type api struct {
	host   string
	client *http.Client
	user   string // impersonated; "" is the admin itself
	media  string // Accept; "": application/json
}

func (a api) as(user string) api {
	a.user = user
	return a
}

func (a api) accepting(mediaType string) api {
	a.media = mediaType
	return a
}

// do sends a request and returns the status code and body. A code that is
// not 2xx is an error too (apiError), with the body's message.
func (a api) do(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.host+path, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	accept := a.media
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if a.user != "" {
		req.Header.Set("Impersonate-User", a.user)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var st struct{ Message string }
		_ = json.Unmarshal(data, &st)
		return data, &apiError{code: resp.StatusCode, msg: st.Message}
	}
	return data, nil
}

type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.code, e.msg) }

func isCode(err error, code int) bool {
	e, ok := err.(*apiError)
	return ok && e.code == code
}

// apply server-side applies a YAML or JSON object to path (the object's
// own URL) as a's user.
func (a api) apply(ctx context.Context, path string, obj []byte, manager string) error {
	_, err := a.do(ctx, http.MethodPatch, path+"?fieldManager="+manager+"&force=true", "application/apply-patch+yaml", obj)
	return err
}

// resourcePath is the collection URL of a kind in a namespace ("" for
// cluster-scoped kinds).
func resourcePath(kind, ns string) string {
	r, ok := kinds[kind]
	if !ok {
		panic("no resource for kind " + kind)
	}
	base := "/api/v1"
	if r.group != "" {
		base = "/apis/" + r.group + "/" + r.version
	}
	if ns == "" {
		return base + "/" + r.plural
	}
	return base + "/namespaces/" + ns + "/" + r.plural
}

type resource struct{ group, version, plural string }

var kinds = map[string]resource{
	"ConfigMap":                 {"", "v1", "configmaps"},
	"Namespace":                 {"", "v1", "namespaces"},
	"ServiceAccount":            {"", "v1", "serviceaccounts"},
	"Deployment":                {"apps", "v1", "deployments"},
	"Job":                       {"batch", "v1", "jobs"},
	"Widget":                    {"robustness.kontinue.dev", "v1", "widgets"},
	"Workload":                  {"carto.run", "v1alpha1", "workloads"},
	"Deliverable":               {"carto.run", "v1alpha1", "deliverables"},
	"Runnable":                  {"carto.run", "v1alpha1", "runnables"},
	"ClusterSupplyChain":        {"carto.run", "v1alpha1", "clustersupplychains"},
	"ClusterDelivery":           {"carto.run", "v1alpha1", "clusterdeliveries"},
	"ClusterSourceTemplate":     {"carto.run", "v1alpha1", "clustersourcetemplates"},
	"ClusterConfigTemplate":     {"carto.run", "v1alpha1", "clusterconfigtemplates"},
	"ClusterImageTemplate":      {"carto.run", "v1alpha1", "clusterimagetemplates"},
	"ClusterTemplate":           {"carto.run", "v1alpha1", "clustertemplates"},
	"ClusterDeploymentTemplate": {"carto.run", "v1alpha1", "clusterdeploymenttemplates"},
	"ClusterRunTemplate":        {"carto.run", "v1alpha1", "clusterruntemplates"},
	"Role":                      {"rbac.authorization.k8s.io", "v1", "roles"},
	"ClusterRole":               {"rbac.authorization.k8s.io", "v1", "clusterroles"},
	"ClusterRoleBinding":        {"rbac.authorization.k8s.io", "v1", "clusterrolebindings"},
	"RoleBinding":               {"rbac.authorization.k8s.io", "v1", "rolebindings"},
}

// objectPath is an object's own URL.
func objectPath(kind, ns, name string) string { return resourcePath(kind, ns) + "/" + name }

// applyYAML applies every document of a YAML stream as a's user.
func (a api) applyYAML(ctx context.Context, stream, manager string) error {
	for _, doc := range strings.Split(stream, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return fmt.Errorf("%w in\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		u := unstructured.Unstructured{Object: m}
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := a.apply(ctx, objectPath(u.GetKind(), u.GetNamespace(), u.GetName()), raw, manager); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// kontinueIdentity applies the RBAC of deploy/install.yaml (its
// Deployment, PodDisruptionBudget and Service left out: Kontinue runs as
// processes of the test) and writes a kubeconfig with a token of its
// ServiceAccount for server, which is the fault proxy's address.
func kontinueIdentity(ctx context.Context, a api, root, server, path string) error {
	data, err := os.ReadFile(filepath.Join(root, "deploy", "install.yaml"))
	if err != nil {
		return err
	}
	var keep []string
	for _, doc := range strings.Split(string(data), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil || len(m) == 0 {
			continue
		}
		switch m["kind"] {
		case "Deployment", "PodDisruptionBudget", "Service":
			continue
		}
		keep = append(keep, doc)
	}
	// The Lease of shard b, as the chart grants it with sharding.shards: [b].
	keep = append(keep, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: kontinue-leader-election-shards, namespace: kontinue-system}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [kontinue-leader-shard-b]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kontinue-leader-election-shards, namespace: kontinue-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: kontinue-leader-election-shards}
subjects: [{kind: ServiceAccount, name: kontinue, namespace: kontinue-system}]`)
	if err := a.applyYAML(ctx, strings.Join(keep, "\n---"), "robustness"); err != nil {
		return err
	}
	var token []byte
	deadline := time.Now().Add(time.Minute)
	for {
		token, err = a.do(ctx, http.MethodPost, objectPath("ServiceAccount", "kontinue-system", "kontinue")+"/token",
			"application/json", []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":172800}}`))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	var tr struct {
		Status struct{ Token string }
	}
	if err := json.Unmarshal(token, &tr); err != nil || tr.Status.Token == "" {
		return fmt.Errorf("token: %v %s", err, token)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: kontinue, user: {token: %q}}]
contexts: [{name: kontinue, context: {cluster: proxy, user: kontinue}}]
current-context: kontinue
`, server, tr.Status.Token)
	return os.WriteFile(path, []byte(kc), 0o600)
}
