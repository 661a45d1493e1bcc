package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

type renderOptions struct {
	files     []string
	outputs   []string
	owner     string
	chain     string
	namespace string
	step      string
	format    string
}

func renderCommand() *command {
	o := &renderOptions{}
	return &command{
		name: "render", short: "print what each step of a chain would stamp, offline (no cluster)",
		usage: "kontinue render -f FILE|FOLDER [-f ...] [--output STEP.OUTPUT=VALUE ...] [--owner NAME] [--chain NAME] [--step NAME] [-o yaml|json]",
		examples: `  # A workload, its supply chain and the templates, in one folder; the first
  # step needs nothing, later ones read the outputs given by hand.
  kontinue render -f config/ -f workload.yaml \
    --output source-provider.url=https://example.com/app.tar.gz \
    --output source-provider.revision=abc123 \
    --output image-builder.image=registry.example.com/app@sha256:0123

  # Only one step, as JSON (objects, or the reason it cannot be stamped).
  kontinue render -f examples/supply-chain.yaml -f workload.yaml --step config-provider -o json

  # Config outputs are YAML, so they can be structured.
  kontinue render -f delivery/ --output config-provider.config='{data: {a: b}}'
`,
		flags: func(fs *pflag.FlagSet, _ *env) {
			fs.StringArrayVarP(&o.files, "filename", "f", nil, "file or folder (recursive: *.yaml, *.yml, *.json) holding the Workload or Deliverable, the chain and the templates; - is stdin; repeatable")
			fs.StringArrayVar(&o.outputs, "output", nil, "an upstream output, STEP.NAME=VALUE (NAME: url, revision, image or config; config values are YAML); repeatable")
			fs.StringVar(&o.owner, "owner", "", "the Workload or Deliverable to render, when the files hold several")
			fs.StringVar(&o.chain, "chain", "", "the ClusterSupplyChain or ClusterDelivery to use (default: chosen by its selector, as the controller does)")
			fs.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the owner when its file names none (default: default)")
			fs.StringVar(&o.step, "step", "", "print only this step")
			fs.StringVarP(&o.format, "format", "o", "yaml", "yaml (objects, with a comment per step) or json (the whole result)")
		},
		run: func(e *env, args []string) error { return runRender(e, o, args) },
	}
}

// parseOutputs reads --output STEP.NAME=VALUE flags.
func parseOutputs(flags []string) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, f := range flags {
		key, value, ok := strings.Cut(f, "=")
		dot := strings.LastIndex(key, ".")
		if !ok || dot <= 0 || dot == len(key)-1 {
			return nil, usagef("--output %q: want STEP.NAME=VALUE, e.g. source-provider.url=https://...", f)
		}
		step, name := key[:dot], key[dot+1:]
		var v any = value
		switch name {
		case "url", "revision", "image":
		case "config":
			if err := yaml.Unmarshal([]byte(value), &v); err != nil {
				return nil, usagef("--output %q: the config is not YAML: %v", f, err)
			}
		default:
			return nil, usagef("--output %q: unknown output %q (url, revision, image or config)", f, name)
		}
		if out[step] == nil {
			out[step] = map[string]any{}
		}
		out[step][name] = v
	}
	return out, nil
}

func runRender(e *env, o *renderOptions, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q: give files with -f", args)
	}
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
	objs, err := LoadObjects(o.files, e.stdin)
	if err != nil {
		return err
	}
	res, err := Render(e.ctx, RenderInput{Objects: objs, Owner: o.owner, Chain: o.chain, Outputs: outs, Namespace: o.namespace})
	if err != nil {
		return err
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
			return fmt.Errorf("%s [%s] has no step [%s]", res.Chain.Kind, res.Chain.Name, o.step)
		}
	}
	if o.format == "json" {
		return writeJSON(e.stdout, res)
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
			fmt.Fprintf(&b, "%s: MissingValueAtPath: %s\n", head, s.Waiting)
		case s.PassThrough != "":
			fmt.Fprintf(&b, "%s: passes input [%s] through, stamps nothing\n", head, s.PassThrough)
		default:
			if s.Runnable {
				head += " (runnable: true: the controller stamps these through a generated Runnable)"
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
	fmt.Fprint(e.stdout, b.String())
	if failed > 0 {
		return fmt.Errorf("%d step(s) cannot be stamped (see the comments above)", failed)
	}
	return nil
}
