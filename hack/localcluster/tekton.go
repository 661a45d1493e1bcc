package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Tekton runs Tekton Pipelines' controller outside the cluster (as its
// config/controller.yaml would inside), with its CRDs and config maps
// applied first. It needs Workloads: kwok plays the TaskRuns' Pods
// (DefaultStages end each step with its KWOK_EXIT_CODE and KWOK_RESULTS).
// Tekton's webhook does not run: the CRDs' conversion is None instead of the
// webhook (withoutConversionWebhook: v1beta1 objects are stored as they are,
// labelled v1), and nothing defaults or validates objects at admission (the
// controller validates when it reconciles).
type Tekton struct {
	// Dir is the folder hack/install-tekton.sh prints: the controller
	// executable and config/ (300-crds/*.yaml, config-*.yaml).
	Dir string
	// FeatureFlags override keys of the feature-flags config map.
	FeatureFlags map[string]string
}

const (
	tektonName = "tekton-pipelines-controller"
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
	if err := executable(filepath.Join(t.Dir, "controller")); err != nil {
		return fmt.Errorf("tekton: %w (run hack/install-tekton.sh)", err)
	}
	return nil
}

// installTekton applies Tekton's namespace, CRDs and config maps. It runs
// before the controller-manager starts, so that the garbage collector
// knows Tekton's kinds from its start (a kind added later is collected
// only after its next discovery, about 30s).
func (c *Cluster) installTekton(ctx context.Context, logf func(string, ...any), o Options) error {
	t := o.Tekton
	t0 := time.Now()
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
			withoutConversionWebhook(d)
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
	logf("Tekton's %d CRDs and %d config maps applied after %.1fs", len(names), len(cms), time.Since(t0).Seconds())
	return nil
}

// withoutConversionWebhook switches a CRD's conversion from Tekton's webhook,
// which does not run here, to None: the API server then serves every
// version of the CRD and only rewrites apiVersion. With the webhook
// strategy every request in a version other than the stored one fails
// (the webhook's Service cannot be reached); with None, objects written as
// tekton.dev/v1beta1 work as long as they use fields that v1 has in the same
// place (Task steps and params, a TaskRun's taskRef, params and
// serviceAccountName, conditions in status), as Cartographer's examples do.
// Fields that moved (a v1beta1 TaskRun's status.taskResults is v1's
// status.results) read as the stored v1 object has them.
func withoutConversionWebhook(crd map[string]any) {
	spec, _ := crd["spec"].(map[string]any)
	conv, _ := spec["conversion"].(map[string]any)
	if conv == nil || conv["strategy"] != "Webhook" {
		return
	}
	spec["conversion"] = map[string]any{"strategy": "None"}
}

// startTekton starts Tekton's controller (installTekton ran) and waits
// until a TaskRun succeeds through it.
func (c *Cluster) startTekton(ctx context.Context, logf func(string, ...any), o Options) error {
	t := o.Tekton
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
