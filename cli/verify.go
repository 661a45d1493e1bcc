package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/verify"
	"kontinue.dev/kontinue/reconciler/verify/check"
)

// `kontinue verify`: an image checked against a chain's verify policies
// by the controller's own code (check.Once: the same fetch and decision),
// every rule said, from the command line.

type verifyOptions struct {
	files    []string
	chain    string
	step     string
	input    string
	material []string
	output   string
	timeout  time.Duration
	color    string
	layout   string
}

func verifyCommand(a *app) *cobra.Command {
	o := &verifyOptions{}
	c := &cobra.Command{
		Use:   "verify IMAGE --chain NAME [--step STEP] [--input NAME]",
		Short: "check an image against a chain's verify policies and say why it passes or not",
		Long: `Check an image (by tag or digest) against the verify policies of a
ClusterSupplyChain's or ClusterDelivery's steps, with the controller's own
code: the tag resolved to a digest once, cosign's signature and attestation
tags and the Sigstore bundles referring to the digest read from the
registry, each rule decided as the controller decides it. Every rule is
printed, passed or not: which signer signed (keys[i], keyless[i] and its
subject), which predicate type, which digest, and why not.

The chain is read from the cluster (--chain NAME or KIND/NAME), or from
files with -f (then --chain picks one when the files hold several). Every
policy of the chain is checked unless --step and --input narrow it
(--input NAME or TYPE/NAME, TYPE image, source or deployment; a source or
deployment is checked as an OCI source whose URL is IMAGE).

Keys and trusted roots the policy names in Secrets or ConfigMaps are read
from the cluster as you, unless given with --material
KIND/NAMESPACE/NAME/KEY=FILE (KIND secret or configmap), or, with -f, found
as Secret or ConfigMap objects in the files: with -f the cluster is never
read. The registry is read with your docker configuration
(~/.docker/config.json, $DOCKER_CONFIG; anonymously when it has nothing for
the registry), not with a workload's service account as the controller
does. With --oci-layout DIR the evidence is read from an OCI image layout
instead (a copy taken with 'crane pull --format=oci --annotate-ref' of the
image and its sha256-<hex>.sig and .att tags, or 'oras copy
--to-oci-layout'; Sigstore bundles as manifests whose subject is the
image): no registry is reached.

Rule kontinue (Kontinue's own statements, in an owner's history) is not
checked here: 'kontinue attest KIND NAME --verify --key' checks those. A
config input has only that rule, so it is skipped.

The exit status is 1 when a policy refuses the image.`,
		Example: `  # Every policy of a chain in the cluster; keys from its Secrets.
  kontinue verify registry.example.com/app:v1 --chain to-production

  # One input of one step, from files (chain, Secret), no cluster.
  kontinue verify registry.example.com/app@sha256:4f2c... -f platform/ \
    --chain to-production --step deploy --input image

  # Offline: the chain and key from files, the evidence from a copy.
  kontinue verify registry.example.com/app@sha256:4f2c... -f platform/ \
    --oci-layout ./app-evidence

  # A key the policy reads from a Secret, given as a file.
  kontinue verify registry.example.com/app:v1 -f chain.yaml \
    --material secret/platform/build-key/cosign.pub=build.pub`,
		Args: exactArgs(1, "an image reference"),
		RunE: func(c *cobra.Command, args []string) error { return a.runVerify(c.Context(), o, args[0]) },
	}
	fs := c.Flags()
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "file or folder (recursive) holding the chain (and Secrets or ConfigMaps with its keys and roots); - is stdin; repeatable. Without: the chain is read from the cluster")
	fs.StringVar(&o.chain, "chain", "", "the ClusterSupplyChain or ClusterDelivery (NAME, or KIND/NAME); with -f, needed only when the files hold several")
	fs.StringVar(&o.step, "step", "", "check only this step's policies")
	fs.StringVar(&o.input, "input", "", "check only this input's policy (NAME, or TYPE/NAME)")
	fs.StringArrayVar(&o.material, "material", nil, "a key or trusted root the policy names, from a file: KIND/NAMESPACE/NAME/KEY=FILE (KIND secret or configmap); repeatable")
	fs.StringVarP(&o.output, "output", "o", "", "text (the default) or json")
	fs.StringVar(&o.layout, "oci-layout", "", "read the image and its signatures, attestations and bundles from this OCI image layout, not from the registry")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound of each policy's fetch and decision (the controller's)")
	colorFlag(fs, &o.color)
	return c
}

// VerifyReport is what `kontinue verify -o json` prints.
type VerifyReport struct {
	Chain  ObjectName    `json:"chain"`
	Image  string        `json:"image"`
	Checks []VerifyCheck `json:"checks"`
}

// VerifyCheck is one policy of one step's input and how the image fared.
type VerifyCheck struct {
	Step  string `json:"step"`
	Type  string `json:"type"`
	Input string `json:"input"`
	// Result: Verified, Refused, or Skipped (only rule kontinue, which
	// is not checked here).
	Result string              `json:"result"`
	Digest string              `json:"digest,omitempty"`
	Rule   string              `json:"rule,omitempty"` // as the step's status would say
	Why    string              `json:"why,omitempty"`
	Rules  []verify.RuleResult `json:"rules,omitempty"`
	// NotChecked names rules present in the policy that are not checked
	// here (kontinue).
	NotChecked []string `json:"notChecked,omitempty"`
}

// parseMaterial reads --material KIND/NAMESPACE/NAME/KEY=FILE flags.
func parseMaterial(flags []string) (map[verify.Ref][]byte, error) {
	out := map[verify.Ref][]byte{}
	for _, f := range flags {
		ref, file, ok := strings.Cut(f, "=")
		parts := strings.Split(ref, "/")
		if !ok || file == "" || len(parts) != 4 || parts[1] == "" || parts[2] == "" || parts[3] == "" {
			return nil, usagef("--material %q: want KIND/NAMESPACE/NAME/KEY=FILE, e.g. secret/platform/build-key/cosign.pub=build.pub", f)
		}
		r := verify.Ref{Namespace: parts[1], Name: parts[2], Key: parts[3]}
		switch strings.ToLower(parts[0]) {
		case "secret":
			r.Secret = true
		case "configmap":
		default:
			return nil, usagef("--material %q: KIND is secret or configmap", f)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		out[r] = b
	}
	return out, nil
}

// materialOf are the keys of the Secrets and ConfigMaps among objs.
func materialOf(objs []*unstructured.Unstructured) map[verify.Ref][]byte {
	out := map[verify.Ref][]byte{}
	for _, o := range objs {
		if o.GetAPIVersion() != "v1" {
			continue
		}
		switch o.GetKind() {
		case "Secret":
			var s corev1.Secret
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s) != nil {
				continue
			}
			for k, v := range s.Data {
				out[verify.Ref{Secret: true, Namespace: o.GetNamespace(), Name: o.GetName(), Key: k}] = v
			}
			for k, v := range s.StringData {
				out[verify.Ref{Secret: true, Namespace: o.GetNamespace(), Name: o.GetName(), Key: k}] = []byte(v)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm) != nil {
				continue
			}
			for k, v := range cm.Data {
				out[verify.Ref{Namespace: o.GetNamespace(), Name: o.GetName(), Key: k}] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				out[verify.Ref{Namespace: o.GetNamespace(), Name: o.GetName(), Key: k}] = v
			}
		}
	}
	return out
}

// cliFetcher is check.Fetcher for the command line: keys and roots given
// (flags, files) first, else read from the cluster (edge.Material, as the
// user; offline: not found); evidence read by the controller's edge with
// the user's keychain.
type cliFetcher struct {
	given map[verify.Ref][]byte
	edge  *check.Edge
	// cluster: read what is not given from it.
	cluster bool
}

func (f *cliFetcher) Material(ctx context.Context, refs []verify.Ref) (verify.Material, error) {
	m := verify.Material{Data: map[verify.Ref][]byte{}}
	for _, r := range refs {
		if b, ok := f.given[r]; ok {
			m.Data[r] = b
			continue
		}
		if !f.cluster {
			continue // Compile says it is not found
		}
		got, err := f.edge.Material(ctx, []verify.Ref{r})
		if err != nil {
			return m, err
		}
		if b, ok := got.Data[r]; ok {
			m.Data[r] = b
		}
	}
	return m, nil
}

func (f *cliFetcher) Evidence(ctx context.Context, req check.Request, t verify.Target, registry bool) (verify.Evidence, error) {
	return f.edge.Evidence(ctx, req, t, registry)
}

// chainFromFiles picks the chain among objs: the one --chain names
// (NAME or KIND/NAME), else the only one.
func chainFromFiles(objs []*unstructured.Unstructured, ref string) (*unstructured.Unstructured, error) {
	kind, name, _ := strings.Cut(ref, "/")
	if name == "" {
		kind, name = "", ref
	}
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if !isCarto(o, api.KindClusterSupplyChain) && !isCarto(o, api.KindClusterDelivery) {
			continue
		}
		if (name == "" || o.GetName() == name) && (kind == "" || strings.EqualFold(kind, o.GetKind())) {
			found = append(found, o)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && ref != "":
		return nil, fmt.Errorf("no ClusterSupplyChain or ClusterDelivery %q in the files", ref)
	case len(found) == 0:
		return nil, fmt.Errorf("no ClusterSupplyChain or ClusterDelivery in the files")
	}
	var names []string
	for _, o := range found {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	return nil, usagef("several chains in the files (%s): pick one with --chain", strings.Join(names, ", "))
}

// selectPolicies are the chain's policies --step and --input name, in
// the chain's order.
func selectPolicies(spec api.ChainSpec, chain, step, input string) ([]api.Step, [][]verify.Named, error) {
	wantType, wantName, typed := strings.Cut(input, "/")
	if !typed {
		wantType, wantName = "", input
	}
	var steps []api.Step
	var named [][]verify.Named
	stepFound := false
	for _, s := range spec.Resources {
		if step != "" && s.Name != step {
			continue
		}
		stepFound = true
		var ns []verify.Named
		v := s.Verify
		if v == nil {
			continue
		}
		add := func(typ string, p api.InputVerify) {
			if typ == verify.TypeDeployment {
				p.Name = verify.TypeDeployment
			}
			if (wantType == "" || wantType == typ) && (wantName == "" || wantName == p.Name) {
				ns = append(ns, verify.Named{Type: typ, Policy: p})
			}
		}
		for _, p := range v.Images {
			add(verify.TypeImage, p)
		}
		for _, p := range v.Sources {
			add(verify.TypeSource, p)
		}
		for _, p := range v.Configs {
			add(verify.TypeConfig, p)
		}
		if v.Deployment != nil {
			add(verify.TypeDeployment, *v.Deployment)
		}
		if len(ns) > 0 {
			steps, named = append(steps, s), append(named, ns)
		}
	}
	switch {
	case step != "" && !stepFound:
		return nil, nil, usagef("%s has no step [%s]", chain, step)
	case len(steps) == 0 && (step != "" || input != ""):
		return nil, nil, fmt.Errorf("%s names no verify policy for step [%s] input [%s]", chain, dash(step), dash(input))
	case len(steps) == 0:
		return nil, nil, fmt.Errorf("%s has no verify policy on any step", chain)
	}
	return steps, named, nil
}

// VerifyImage checks image against each selected policy with f.
func VerifyImage(ctx context.Context, f check.Fetcher, chain ObjectName, spec api.ChainSpec, image, step, input string, timeout time.Duration) (*VerifyReport, error) {
	ref := chain.Kind + " " + chain.Name
	steps, named, err := selectPolicies(spec, ref, step, input)
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{Chain: chain, Image: image, Checks: []VerifyCheck{}}
	for i, s := range steps {
		for _, n := range named[i] {
			c := VerifyCheck{Step: s.Name, Type: n.Type, Input: n.Policy.Name}
			if err := verify.Validate(api.Step{Name: s.Name, Images: s.Images, Sources: s.Sources, Configs: s.Configs, Deployment: s.Deployment, Verify: onlyPolicy(n)}); err != nil {
				// As the controller: a policy that cannot be used takes nothing.
				c.Result, c.Rule, c.Why = string(verify.Refused), verify.RulePolicy, err.Error()
				c.Rules = []verify.RuleResult{{Rule: verify.RulePolicy, Why: err.Error()}}
				rep.Checks = append(rep.Checks, c)
				continue
			}
			p := n.Policy
			if p.Kontinue != nil {
				c.NotChecked = []string{verify.RuleKontinue}
				p.Kontinue = nil
			}
			if len(p.Keys)+len(p.Keyless)+len(p.Attestations) == 0 {
				c.Result, c.Why = "Skipped", "only rule kontinue, not checked here (kontinue attest --verify checks Kontinue's statements)"
				rep.Checks = append(rep.Checks, c)
				continue
			}
			var value any = image
			if n.Type != verify.TypeImage {
				value = verify.Source{URL: image}
			}
			fctx, cancel := context.WithTimeout(ctx, timeout)
			res, rules, err := check.Once(fctx, f, check.Request{Type: n.Type, Input: n.Policy.Name, Value: value, Policy: p}, true)
			cancel()
			if err != nil {
				return rep, fmt.Errorf("step [%s] %s [%s]: %w", s.Name, n.Type, n.Policy.Name, err)
			}
			c.Result, c.Digest, c.Rule, c.Why, c.Rules = string(res.Outcome), res.Digest, res.Rule, res.Why, rules
			rep.Checks = append(rep.Checks, c)
		}
	}
	return rep, nil
}

// onlyPolicy is a StepVerify holding n alone (Validate of one input).
func onlyPolicy(n verify.Named) *api.StepVerify {
	v := &api.StepVerify{}
	switch n.Type {
	case verify.TypeImage:
		v.Images = []api.InputVerify{n.Policy}
	case verify.TypeSource:
		v.Sources = []api.InputVerify{n.Policy}
	case verify.TypeConfig:
		v.Configs = []api.InputVerify{n.Policy}
	case verify.TypeDeployment:
		p := n.Policy
		v.Deployment = &p
	}
	return v
}

func (a *app) runVerify(ctx context.Context, o *verifyOptions, image string) error {
	switch o.output {
	case "", "text", "json":
	default:
		return usagef("-o must be text or json")
	}
	color, err := a.useColor(o.color)
	if err != nil {
		return err
	}
	given, err := parseMaterial(o.material)
	if err != nil {
		return err
	}
	edge := &check.Edge{Keychain: authn.DefaultKeychain}
	if o.layout != "" {
		if edge.Transport, err = layoutTransport(o.layout, image); err != nil {
			return err
		}
		edge.Keychain = authn.NewMultiKeychain() // anonymous: nothing to authenticate to
	}
	f := &cliFetcher{given: given, edge: edge}
	var chainObj *unstructured.Unstructured
	if len(o.files) > 0 {
		objs, err := LoadObjects(o.files, a.env.Stdin)
		if err != nil {
			return err
		}
		if chainObj, err = chainFromFiles(objs, o.chain); err != nil {
			return err
		}
		for r, b := range materialOf(objs) {
			if _, ok := f.given[r]; !ok {
				f.given[r] = b
			}
		}
		// The cluster is not read: no client (the evidence is read with
		// the keychain, and rule kontinue, which reads histories, is not
		// checked).
		edge.As = func(string, string) (dynamic.Interface, error) { return nil, nil }
	} else {
		if o.chain == "" {
			return usagef("give the chain with --chain (or the files holding it with -f)")
		}
		dyn, _, err := a.dynamicClient("kontinue-verify")
		if err != nil {
			return err
		}
		if chainObj, err = findChain(ctx, dyn, o.chain); err != nil {
			return err
		}
		f.cluster, edge.Kontinue = true, dyn
		edge.As = func(string, string) (dynamic.Interface, error) { return dyn, nil }
	}
	spec, _, err := prepare.DecodeChain(chainObj)
	if err != nil {
		return err
	}
	rep, err := VerifyImage(ctx, f, ObjectName{Kind: chainObj.GetKind(), Name: chainObj.GetName()}, spec, image, o.step, o.input, o.timeout)
	if err != nil {
		return err
	}
	if o.output == "json" {
		if err := writeJSON(a.env.Stdout, rep); err != nil {
			return err
		}
	} else {
		printVerify(a.env.Stdout, color, rep)
	}
	refused := 0
	for _, c := range rep.Checks {
		if c.Result == string(verify.Refused) {
			refused++
		}
	}
	if refused > 0 {
		return fmt.Errorf("%s refused by %d of %d policies", image, refused, len(rep.Checks))
	}
	return nil
}

// printVerify prints each policy's result, then each rule: ✔ by whom,
// ✗ why not.
func printVerify(w io.Writer, color bool, rep *VerifyReport) {
	fmt.Fprintf(w, "%s %s, image %s\n", rep.Chain.Kind, rep.Chain.Name, rep.Image)
	for _, c := range rep.Checks {
		code := cGreen
		switch c.Result {
		case string(verify.Refused):
			code = cRed
		case "Skipped":
			code = cYellow
		}
		line := fmt.Sprintf("  step [%s] %s [%s]: %s", c.Step, c.Type, c.Input, paint(color, code, c.Result))
		if c.Digest != "" {
			line += " " + c.Digest
		}
		fmt.Fprintln(w, line)
		if c.Result == "Skipped" {
			fmt.Fprintf(w, "    - %s\n", c.Why)
			continue
		}
		for _, r := range c.Rules {
			mark, why := paint(color, cRed, "✗"), r.Why
			if r.Passed {
				mark = paint(color, cGreen, "✔")
			}
			fmt.Fprintf(w, "    %s %s: %s\n", mark, r.Rule, why)
		}
		for _, n := range c.NotChecked {
			fmt.Fprintf(w, "    %s %s: not checked here (kontinue attest --verify checks Kontinue's statements)\n", paint(color, cYellow, "-"), n)
		}
	}
}
