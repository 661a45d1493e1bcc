// Package clientconfig loads the configuration to reach a cluster the way
// kubectl does, for the controller and the CLI alike: --kubeconfig, else
// every file of $KUBECONFIG (merged, the first file winning), else
// ~/.kube/config; kubectl's connection flags (--context, -n, --server,
// --token, --as, --request-timeout, ...) override the kubeconfig; with none
// of those files, the in-cluster configuration.
package clientconfig

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Flags are kubectl's flags that pick a cluster, a user and a namespace.
type Flags struct {
	// Kubeconfig is a single file, overriding $KUBECONFIG and ~/.kube/config.
	Kubeconfig string
	// Overrides are client-go's: --context, -n, --server, --token, --as, ...
	Overrides clientcmd.ConfigOverrides
	// WrapTransport, when set, wraps the transport of the loaded
	// configuration (tests count requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Bind adds --kubeconfig and kubectl's connection flags
// (clientcmd.RecommendedConfigOverrideFlags) to fs.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file to use (default: the files of $KUBECONFIG, else ~/.kube/config, else the in-cluster configuration)")
	clientcmd.BindOverrideFlags(&f.Overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
}

// Context is the --context flag ("" for the current context).
func (f *Flags) Context() string { return f.Overrides.CurrentContext }

// Namespace is the -n flag as given ("" when not given).
func (f *Flags) Namespace() string { return f.Overrides.Context.Namespace }

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
func (f *Flags) Load() (*Loaded, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	overrides := f.Overrides // the loader must not change the flags
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	inCluster := f.Kubeconfig == "" && isEmpty(raw) && f.Overrides.ClusterInfo.Server == ""
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
	if f.WrapTransport != nil {
		cfg.Wrap(f.WrapTransport)
	}
	return &Loaded{Config: cfg, Namespace: ns, InCluster: inCluster}, nil
}

func isEmpty(c clientcmdapi.Config) bool {
	return len(c.Clusters) == 0 && len(c.AuthInfos) == 0 && len(c.Contexts) == 0
}
