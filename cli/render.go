package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/step"
)

type renderOptions struct {
	files   []string
	outputs []string
	owner   string
	chain   string
	step    string
	format  string
	helm    render.HelmOptions
}

func renderCommand(a *app) *cobra.Command {
	o := &renderOptions{}
	c := &cobra.Command{
		Use:   "render -f FILE|FOLDER",
		Short: "print what each step of a chain would stamp, offline (no cluster)",
		Long: `Render each step of a chain for a Workload or Deliverable, offline, with the
controller's own code: chain and options chosen by their selectors, params
merged, the object rendered by the template's engine. No cluster is read:
the connection flags do not apply, except -n, the owner's namespace when its
file names none (default: default).

Nothing is stamped, so upstream outputs are given by hand with --step-output
STEP.NAME=VALUE (NAME: url, revision, image or config); a step waiting for
outputs says which. Outputs given for a step pass on to later steps even
when that step cannot be rendered itself. A config is taken as the step's
object holds it: text where it holds text (a ConfigMap's data entry), else
YAML (so it can be structured).

The exit status is 1 when a step cannot be stamped.`,
		Example: `  # The example chain (the file holds a workload too): the first step renders,
  # the later ones wait for the outputs of earlier steps.
  kontinue render -f examples/supply-chain.yaml

  # Give what the steps would output: every step renders.
  kontinue render -f examples/supply-chain.yaml \
    --step-output source-provider.url=https://example.com/hello.tar.gz \
    --step-output source-provider.revision=abc123 \
    --step-output image-builder.image=registry.example.com/hello@sha256:0123 \
    --step-output app-config.config='image: registry.example.com/hello@sha256:0123'

  # Only one step, as JSON; outputs of the step right before it are enough.
  kontinue render -f examples/supply-chain.yaml --step app-config -o json \
    --step-output image-builder.image=registry.example.com/hello@sha256:0123

  # A folder of templates and chains (recursive) and a workload from stdin.
  cat workload.yaml | kontinue render -f config/ -f -`,
		Args: NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return a.runRender(c.Context(), o) },
	}
	fs := c.Flags()
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "file or folder (recursive: *.yaml, *.yml, *.json) holding the Workload or Deliverable, the chain and the templates; - is stdin; repeatable")
	fs.StringArrayVar(&o.outputs, "step-output", nil, "an output of an earlier step, STEP.NAME=VALUE (NAME: url, revision, image or config); repeatable")
	fs.StringVar(&o.owner, "owner", "", "the Workload or Deliverable to render, when the files hold several")
	fs.StringVar(&o.chain, "chain", "", "the ClusterSupplyChain or ClusterDelivery to use (default: chosen by its selector, as the controller does)")
	fs.StringVar(&o.step, "step", "", "print only this step")
	fs.StringVarP(&o.format, "output", "o", "yaml", "yaml (the objects, with a comment per step) or json (the whole result)")
	fs.BoolVar(&o.helm.AllowPrivateNetworks, "helm-allow-private-networks", false, "let helm templates fetch charts from loopback, private and link-local addresses (as the controller's flag)")
	fs.BoolVar(&o.helm.AllowHTTP, "helm-allow-http", false, "let helm templates fetch charts over plain http (as the controller's flag)")
	return c
}

// parseOutputs reads --step-output STEP.NAME=VALUE flags. Values stay
// strings: Render decides whether a config is text or YAML.
func parseOutputs(flags []string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, f := range flags {
		key, value, ok := strings.Cut(f, "=")
		dot := strings.LastIndex(key, ".")
		if !ok || dot <= 0 || dot == len(key)-1 {
			return nil, usagef("--step-output %q: want STEP.NAME=VALUE, e.g. source-provider.url=https://...", f)
		}
		step, name := key[:dot], key[dot+1:]
		var v any = value
		switch name {
		case "url", "revision", "image":
		case "config":
		default:
			return nil, usagef("--step-output %q: unknown output %q (url, revision, image or config)", f, name)
		}
		if out[step] == nil {
			out[step] = map[string]any{}
		}
		out[step][name] = v
	}
	return out, nil
}

func (a *app) runRender(ctx context.Context, o *renderOptions) error {
	if len(o.files) == 0 {
		return usagef("give the files with -f")
	}
	if o.format != "yaml" && o.format != "json" {
		return usagef("-o must be yaml or json")
	}
	outs, err := parseOutputs(o.outputs)
	if err != nil {
		return err
	}
	objs, err := LoadObjects(o.files, a.env.Stdin)
	if err != nil {
		return err
	}
	res, err := Render(ctx, RenderInput{Objects: objs, Owner: o.owner, Chain: o.chain, Outputs: outs, Namespace: a.cluster.Namespace(), Helm: o.helm})
	if err != nil {
		return err
	}
	for step := range outs {
		if !hasStep(res, step) {
			return usagef("--step-output names step [%s], which %s [%s] does not have (steps: %s)", step, res.Chain.Kind, res.Chain.Name, stepNames(res))
		}
	}
	if o.step != "" {
		found := false
		for _, s := range res.Steps {
			if s.Name == o.step {
				res.Steps, found = append(res.Steps[:0:0], s), true
				break
			}
		}
		if !found {
			return usagef("%s [%s] has no step [%s] (steps: %s)", res.Chain.Kind, res.Chain.Name, o.step, stepNames(res))
		}
	}
	if o.format == "json" {
		return writeJSON(a.env.Stdout, res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s %s/%s, %s %s\n", res.Owner.Kind, res.Owner.Namespace, res.Owner.Name, res.Chain.Kind, res.Chain.Name)
	failed := 0
	for _, s := range res.Steps {
		head := "# step [" + s.Name + "]"
		if s.Template != nil {
			head += " " + s.Template.Kind + "/" + s.Template.Name
		}
		switch {
		case s.Error != "":
			failed++
			fmt.Fprintf(&b, "%s: %s: %s\n", head, s.Reason, s.Error)
		case s.Waiting != "":
			fmt.Fprintf(&b, "%s: %s: %s\n", head, step.ReasonMissingValueAtPath, s.Waiting)
		case s.PassThrough != "":
			fmt.Fprintf(&b, "%s: passes input [%s] through, stamps nothing\n", head, s.PassThrough)
		default:
			if s.Note != "" {
				head += " (" + s.Note + ")"
			}
			fmt.Fprintf(&b, "%s\n", head)
			for _, obj := range s.Objects {
				y, err := yaml.Marshal(obj)
				if err != nil {
					return err
				}
				fmt.Fprintf(&b, "---\n%s", y)
			}
		}
	}
	fmt.Fprint(a.env.Stdout, b.String())
	if failed > 0 {
		return fmt.Errorf("%d step(s) cannot be stamped (see the comments above)", failed)
	}
	return nil
}

func hasStep(res *RenderResult, name string) bool {
	for _, s := range res.Steps {
		if s.Name == name {
			return true
		}
	}
	return false
}

func stepNames(res *RenderResult) string {
	var n []string
	for _, s := range res.Steps {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}
