// Package clientconfig loads the configuration to reach a cluster the way
// kubectl does, for the controller and the CLI alike: --kubeconfig, else
// every file of $KUBECONFIG (merged, the first file winning), else
// ~/.kube/config; --context and --namespace override the current context;
// with none of those files, the in-cluster configuration.
package clientconfig

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Flags are the kubectl-like flags that pick a cluster, a user and a
// namespace.
type Flags struct {
	Kubeconfig string // a single file, overriding $KUBECONFIG and ~/.kube/config
	Context    string
	Namespace  string
}

// Loaded is a configuration ready to use.
type Loaded struct {
	Config *rest.Config
	// Namespace is --namespace, else the context's namespace, else
	// "default" (in a pod: the pod's namespace).
	Namespace string
	// InCluster is true when no kubeconfig was found and the in-cluster
	// configuration is used.
	InCluster bool
}

// Load resolves f into a client configuration.
func (f Flags) Load() (*Loaded, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	overrides.Context.Namespace = f.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	inCluster := f.Kubeconfig == "" && isEmpty(raw)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) || errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("no usable cluster configuration: set --kubeconfig or $KUBECONFIG, create ~/.kube/config, or run in a cluster: %w", err)
		}
		return nil, err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, err
	}
	if ns == "" {
		ns = "default"
	}
	return &Loaded{Config: cfg, Namespace: ns, InCluster: inCluster}, nil
}

func isEmpty(c clientcmdapi.Config) bool {
	return len(c.Clusters) == 0 && len(c.AuthInfos) == 0 && len(c.Contexts) == 0
}
