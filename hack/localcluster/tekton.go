package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Tekton runs Tekton Pipelines' controller and webhook outside the cluster
// (as its config/controller.yaml and config/webhook.yaml would inside), with
// its CRDs, config maps and webhook configurations applied first. It needs
// Workloads: kwok plays the TaskRuns' Pods (DefaultStages end each step
// with its KWOK_EXIT_CODE and KWOK_RESULTS).
//
// The API server reaches the webhook (conversion between tekton.dev/v1beta1
// and v1, defaulting, validation) through its Service, which here is of
// type ExternalName pointing at localhost: the API server resolves such a
// Service to its externalName and the port the webhook configuration names
// (webhookPort sets the webhook's port there), and verifies the certificate
// the webhook made for tekton-pipelines-webhook.tekton-pipelines.svc.
type Tekton struct {
	// Dir is the folder hack/install-tekton.sh prints: the controller and
	// webhook executables and config/ (300-crds/*.yaml, config-*.yaml,
	// 500-webhooks.yaml).
	Dir string
	// FeatureFlags override keys of the feature-flags config map.
	FeatureFlags map[string]string
}

const (
	tektonName        = "tekton-pipelines-controller"
	tektonWebhookName = "tekton-pipelines-webhook"
	// TektonNamespace is Tekton's system namespace (its config maps).
	TektonNamespace = "tekton-pipelines"
)

var (
	tektonTimeout       = 60 * time.Second
	tektonCanaryTimeout = 90 * time.Second
	crdTimeout          = 60 * time.Second
)

func (t *Tekton) check() error {
	if t.Dir == "" {
		return errors.New("Tekton.Dir is empty (run hack/install-tekton.sh)")
	}
	for _, b := range []string{"controller", "webhook"} {
		if err := executable(filepath.Join(t.Dir, b)); err != nil {
			return fmt.Errorf("tekton: %w (run hack/install-tekton.sh)", err)
		}
	}
	return nil
}

// installTekton applies Tekton's namespace, CRDs, config maps, the
// webhook's Service and its webhook configurations (the webhook's port is
// chosen here: they name it). It runs before the controller-manager
// starts, so that the garbage collector knows Tekton's kinds from its start
// (a kind added later is collected only after its next discovery, about
// 30s).
func (c *Cluster) installTekton(ctx context.Context, logf func(string, ...any), o Options) error {
	t := o.Tekton
	t0 := time.Now()
	ports, err := freePorts(1)
	if err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	c.tektonWebhookPort = ports[0]
	if err := c.create(ctx, "/api/v1/namespaces", map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": TektonNamespace},
	}); err != nil {
		return fmt.Errorf("localcluster: tekton namespace: %w", err)
	}
	crds, err := filepath.Glob(filepath.Join(t.Dir, "config", "300-crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("localcluster: no Tekton CRDs in %s/config/300-crds (run hack/install-tekton.sh)", t.Dir)
	}
	var names []string
	for _, f := range crds {
		docs, err := readYAML(f)
		if err != nil {
			return fmt.Errorf("localcluster: %w", err)
		}
		for _, d := range docs {
			webhookPort(d, c.tektonWebhookPort)
			if err := c.create(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", d); err != nil {
				return fmt.Errorf("localcluster: Tekton CRD %s: %w", str(d, "metadata", "name"), err)
			}
			names = append(names, str(d, "metadata", "name"))
		}
	}
	for _, name := range names {
		err := poll(ctx, crdTimeout, "CRD "+name+" established", func(ctx context.Context) error {
			var crd map[string]any
			if err := c.call(ctx, http.MethodGet, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, "", nil, &crd); err != nil {
				return err
			}
			if st, _, _ := conditionStatus(crd, "Established"); st != "True" {
				return fmt.Errorf("condition Established is %q", st)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("localcluster: %w", err)
		}
	}
	cms, _ := filepath.Glob(filepath.Join(t.Dir, "config", "config-*.yaml"))
	sort.Strings(cms)
	for _, f := range cms {
		docs, err := readYAML(f)
		if err != nil {
			return fmt.Errorf("localcluster: %w", err)
		}
		for _, d := range docs {
			if str(d, "metadata", "name") == "feature-flags" && len(t.FeatureFlags) > 0 {
				data, _ := d["data"].(map[string]any)
				if data == nil {
					data = map[string]any{}
				}
				for k, v := range t.FeatureFlags {
					data[k] = v
				}
				d["data"] = data
			}
			if err := c.create(ctx, "/api/v1/namespaces/"+TektonNamespace+"/configmaps", d); err != nil {
				return fmt.Errorf("localcluster: Tekton config map %s: %w", str(d, "metadata", "name"), err)
			}
		}
	}
	// The webhook's Service, and its configurations last: they make the
	// API server call the webhook for Tekton's objects and config maps,
	// failing until it runs.
	if err := c.create(ctx, "/api/v1/namespaces/"+TektonNamespace+"/services", map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": tektonWebhookName, "namespace": TektonNamespace},
		"spec": map[string]any{"type": "ExternalName", "externalName": "localhost",
			"ports": []any{map[string]any{"name": "https-webhook", "port": c.tektonWebhookPort}}},
	}); err != nil {
		return fmt.Errorf("localcluster: Tekton webhook service: %w", err)
	}
	docs, err := readYAML(filepath.Join(t.Dir, "config", "500-webhooks.yaml"))
	if err != nil {
		return fmt.Errorf("localcluster: %w (run hack/install-tekton.sh)", err)
	}
	for _, d := range docs {
		webhookPort(d, c.tektonWebhookPort)
		path := "/api/v1/namespaces/" + TektonNamespace + "/secrets"
		switch d["kind"] {
		case "ValidatingWebhookConfiguration":
			path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
		case "MutatingWebhookConfiguration":
			path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
		}
		if err := c.create(ctx, path, d); err != nil {
			return fmt.Errorf("localcluster: Tekton %s %s: %w", d["kind"], str(d, "metadata", "name"), err)
		}
	}
	logf("Tekton's %d CRDs, %d config maps and webhook configurations applied after %.1fs", len(names), len(cms), time.Since(t0).Seconds())
	return nil
}

// webhookPort sets port on every reference to a Service in a CRD's
// conversion webhook or in a webhook configuration: Tekton's name none
// (443), and the webhook listens on a free port. Tekton's webhook later
// fills in the CA bundle and the path, and keeps the port.
func webhookPort(obj map[string]any, port int) {
	setPort := func(clientConfig any) {
		cc, _ := clientConfig.(map[string]any)
		if svc, ok := cc["service"].(map[string]any); ok {
			svc["port"] = port
		}
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		if conv, ok := spec["conversion"].(map[string]any); ok {
			if wh, ok := conv["webhook"].(map[string]any); ok {
				setPort(wh["clientConfig"])
			}
		}
	}
	webhooks, _ := obj["webhooks"].([]any)
	for _, w := range webhooks {
		if m, ok := w.(map[string]any); ok {
			setPort(m["clientConfig"])
		}
	}
}

// startTektonWebhook starts Tekton's webhook and waits until it has made
// its certificate and written its CA bundle into every CRD and webhook
// configuration that names it, so that the API server can call it.
func (c *Cluster) startTektonWebhook(ctx context.Context, logf func(string, ...any), o Options) error {
	t := o.Tekton
	return c.startComponent(ctx, logf, tektonWebhookName, tektonTimeout, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(3)
		if err != nil {
			return nil, nil, err
		}
		env := []string{
			// As in Tekton's config/webhook.yaml.
			"SYSTEM_NAMESPACE=" + TektonNamespace,
			"CONFIG_LOGGING_NAME=config-logging",
			"CONFIG_OBSERVABILITY_NAME=config-observability",
			"CONFIG_LEADERELECTION_NAME=config-leader-election-webhook",
			"CONFIG_FEATURE_FLAGS_NAME=feature-flags",
			"WEBHOOK_ADMISSION_CONTROLLER_NAME=webhook.pipeline.tekton.dev",
			"WEBHOOK_SERVICE_NAME=" + tektonWebhookName,
			"WEBHOOK_SECRET_NAME=webhook-certs",
			"METRICS_DOMAIN=tekton.dev/pipeline",
			"WEBHOOK_PORT=" + strconv.Itoa(c.tektonWebhookPort),
			// Its other listeners, on free ports.
			"PROBES_PORT=" + strconv.Itoa(ports[0]),
			"PROFILING_PORT=" + strconv.Itoa(ports[1]),
			"METRICS_PROMETHEUS_PORT=" + strconv.Itoa(ports[2]),
			"METRICS_PROMETHEUS_HOST=127.0.0.1",
		}
		args := []string{"-kubeconfig=" + c.Kubeconfig, "-disable-ha"}
		proc, err := launch(tektonWebhookName, filepath.Join(t.Dir, "webhook"), args,
			env, c.Dir, filepath.Join(c.Dir, "logs", tektonWebhookName+".log"), o.Detach)
		return proc, c.tektonWebhookReady, err
	})
}

// tektonWebhookReady checks that the webhook serves TLS on its port and
// that every CRD and webhook configuration naming its Service has a CA
// bundle.
func (c *Cluster) tektonWebhookReady(ctx context.Context) error {
	// A TLS handshake (a bare connection shows in its log as a failed
	// one); the API server verifies the certificate, this only sees that
	// the webhook serves one.
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // readiness only
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.tektonWebhookPort)))
	if err != nil {
		return err
	}
	_ = conn.Close()
	for _, l := range []string{
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
	} {
		var list struct{ Items []map[string]any }
		if err := c.call(ctx, http.MethodGet, l, "", nil, &list); err != nil {
			return err
		}
		for _, obj := range list.Items {
			var configs []any
			if wh, ok := nestedMap(obj, "spec", "conversion", "webhook"); ok {
				configs = append(configs, wh)
			}
			ws, _ := obj["webhooks"].([]any)
			configs = append(configs, ws...)
			for _, w := range configs {
				cc, _ := w.(map[string]any)["clientConfig"].(map[string]any)
				svc, _ := cc["service"].(map[string]any)
				if svc == nil || svc["name"] != tektonWebhookName {
					continue
				}
				if b, _ := cc["caBundle"].(string); b == "" {
					return fmt.Errorf("%s has no CA bundle for the webhook yet", str(obj, "metadata", "name"))
				}
			}
		}
	}
	return nil
}

func nestedMap(obj map[string]any, path ...string) (map[string]any, bool) {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// startTekton starts Tekton's webhook and controller (installTekton ran)
// and waits until a TaskRun succeeds through them.
func (c *Cluster) startTekton(ctx context.Context, logf func(string, ...any), o Options) error {
	t := o.Tekton
	if err := c.startTektonWebhook(ctx, logf, o); err != nil {
		return err
	}
	err := c.startComponent(ctx, logf, tektonName, tektonTimeout, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(3)
		if err != nil {
			return nil, nil, err
		}
		probes := strconv.Itoa(ports[0])
		env := []string{
			// As in Tekton's config/controller.yaml.
			"SYSTEM_NAMESPACE=" + TektonNamespace,
			"CONFIG_DEFAULTS_NAME=config-defaults",
			"CONFIG_LOGGING_NAME=config-logging",
			"CONFIG_OBSERVABILITY_NAME=config-observability",
			"CONFIG_FEATURE_FLAGS_NAME=feature-flags",
			"CONFIG_LEADERELECTION_NAME=config-leader-election-controller",
			"CONFIG_SPIRE=config-spire",
			"METRICS_DOMAIN=tekton.dev/pipeline",
			// Its listeners, on free ports (defaults 8080, 8008, 9090).
			"PROBES_PORT=" + probes,
			"PROFILING_PORT=" + strconv.Itoa(ports[1]),
			"METRICS_PROMETHEUS_PORT=" + strconv.Itoa(ports[2]),
			"METRICS_PROMETHEUS_HOST=127.0.0.1",
		}
		args := []string{
			"-kubeconfig=" + c.Kubeconfig,
			// One replica: no leader election (it would wait for a lease
			// after a restart).
			"-disable-ha",
			// Image names only: kwok plays the containers, nothing is pulled.
			"-entrypoint-image=tekton.invalid/entrypoint",
			"-nop-image=tekton.invalid/nop",
			"-sidecarlogresults-image=tekton.invalid/sidecarlogresults",
			"-workingdirinit-image=tekton.invalid/workingdirinit",
			"-shell-image=tekton.invalid/shell",
			"-shell-image-win=tekton.invalid/shell-win",
		}
		proc, err := launch(tektonName, filepath.Join(t.Dir, "controller"), append(args, o.TektonArgs...),
			env, c.Dir, filepath.Join(c.Dir, "logs", tektonName+".log"), o.Detach)
		return proc, func(ctx context.Context) error {
			return probe(ctx, http.DefaultClient, "http://127.0.0.1:"+probes+"/health", http.StatusOK)
		}, err
	})
	if err != nil {
		return err
	}
	t1 := time.Now()
	if err := c.TektonCanary(ctx, tektonCanaryTimeout); err != nil {
		return fmt.Errorf("localcluster: %w\n--- last 20 lines of the %s log ---\n%s", err, tektonName,
			tail(filepath.Join(c.Dir, "logs", tektonName+".log"), 20))
	}
	logf("a Tekton TaskRun succeeded after %.1fs", time.Since(t1).Seconds())
	return nil
}

// TektonCanary runs a one-step TaskRun in Tekton's namespace, waits until
// Tekton's controller reports it Succeeded=True (kwok playing its Pod), and
// deletes it: proof that Tekton, the scheduler and kwok all work.
func (c *Cluster) TektonCanary(ctx context.Context, timeout time.Duration) error {
	name := fmt.Sprintf("kontinue-canary-%d", time.Now().UnixNano())
	path := "/apis/tekton.dev/v1/namespaces/" + TektonNamespace + "/taskruns"
	tr := map[string]any{
		"apiVersion": "tekton.dev/v1",
		"kind":       "TaskRun",
		"metadata":   map[string]any{"name": name, "namespace": TektonNamespace},
		"spec": map[string]any{"taskSpec": map[string]any{"steps": []any{
			map[string]any{"name": "ok", "image": "tekton.invalid/canary", "command": []any{"true"}},
		}}},
	}
	if err := c.create(ctx, path, tr); err != nil {
		return fmt.Errorf("canary TaskRun: %w", err)
	}
	defer func() {
		_ = c.call(context.Background(), http.MethodDelete, path+"/"+name, "",
			map[string]any{"propagationPolicy": "Background"}, nil)
	}()
	return poll(ctx, timeout, "canary TaskRun "+name+" Succeeded", func(ctx context.Context) error {
		var obj map[string]any
		if err := c.call(ctx, http.MethodGet, path+"/"+name, "", nil, &obj); err != nil {
			return err
		}
		st, reason, msg := conditionStatus(obj, "Succeeded")
		switch st {
		case "True":
			return nil
		case "False":
			return permanentError{fmt.Errorf("failed: %s: %s", reason, msg)}
		}
		return fmt.Errorf("condition Succeeded is %q (%s)", st, reason)
	})
}

func readYAML(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := splitYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return docs, nil
}
