package prepare

// What a step reads from earlier steps' outputs.

import (
	"fmt"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

type inputList struct {
	typ    string // source, image, config, deployment
	inputs []api.StepInput
}

// inputLists are a step's inputs by type, in the order they are read.
func inputLists(def api.Step) []inputList {
	l := []inputList{{"source", def.Sources}, {"image", def.Images}, {"config", def.Configs}}
	if def.Deployment != nil {
		l = append(l, inputList{"deployment", []api.StepInput{{Name: "deployment", Resource: def.Deployment.Resource}}})
	}
	return l
}

// InputSteps are the earlier steps a step reads, once each, in order.
func InputSteps(def api.Step) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range inputLists(def) {
		for _, i := range l.inputs {
			if i.Resource != "" && !seen[i.Resource] {
				seen[i.Resource] = true
				out = append(out, i.Resource)
			}
		}
	}
	return out
}

// Inputs collects a step's inputs (of a template of kind) from earlier
// steps' outputs. missing lists the inputs whose step has no outputs yet;
// err says why the step's inputs can never be read.
func Inputs(env Env, def api.Step, kind string, outs map[string]step.Outputs) (in render.Inputs, missing []Missing, err error) {
	earlier := map[string]bool{}
	for _, s := range env.Chain.Resources {
		if s.Name == def.Name {
			break
		}
		earlier[s.Name] = true
	}
	in = render.Inputs{Sources: map[string]render.Source{}, Images: map[string]any{}, Configs: map[string]any{}}
	for _, l := range inputLists(def) {
		if l.typ == "deployment" && kind != api.KindClusterDeploymentTemplate {
			return in, nil, fmt.Errorf("step [%s] receives deployment, but only a %s step can take it (the step uses a %s)", def.Name, api.KindClusterDeploymentTemplate, kind)
		}
		for _, i := range l.inputs {
			if !earlier[i.Resource] {
				return in, nil, fmt.Errorf("step [%s] reads %s [%s] from step [%s], which is not an earlier step of %s [%s]", def.Name, l.typ, i.Name, i.Resource, env.Flavor.ChainNoun, env.ChainName)
			}
			o, ok := outs[i.Resource]
			if !ok {
				missing = append(missing, Missing{Step: i.Resource, Type: l.typ})
				continue
			}
			switch l.typ {
			case "source":
				in.Sources[i.Name] = render.Source{URL: o["url"], Revision: o["revision"]}
			case "image":
				in.Images[i.Name] = o["image"]
			case "config":
				in.Configs[i.Name] = o["config"]
			case "deployment":
				in.Deployment = &render.Source{URL: o["url"], Revision: o["revision"]}
			}
		}
	}
	if def.Deployment == nil && kind == api.KindClusterDeploymentTemplate {
		return in, nil, fmt.Errorf("step [%s] uses a %s but has no deployment input", def.Name, api.KindClusterDeploymentTemplate)
	}
	return in, missing, nil
}

// InputValues are the values of a step's inputs as its provenance records
// them (st.InputSet without digest or times), in the step's order;
// generation is the owner's.
func InputValues(def api.Step, in render.Inputs, generation int64) st.InputSet {
	set := st.InputSet{OwnerGeneration: generation}
	for _, i := range def.Sources {
		if s, ok := in.Sources[i.Name]; ok {
			set.Sources = append(set.Sources, st.SourceValue{Name: i.Name, Resource: i.Resource, URL: st.Value(s.URL), Revision: st.Value(s.Revision)})
		}
	}
	for _, i := range def.Images {
		if v, ok := in.Images[i.Name]; ok {
			set.Images = append(set.Images, st.ImageValue{Name: i.Name, Resource: i.Resource, Image: st.Value(v)})
		}
	}
	for _, i := range def.Configs {
		if v, ok := in.Configs[i.Name]; ok {
			set.Configs = append(set.Configs, st.ConfigValue{Name: i.Name, Resource: i.Resource, Digest: st.ConfigDigest(v)})
		}
	}
	if d := in.Deployment; d != nil && def.Deployment != nil {
		set.Deployment = &st.SourceValue{Name: "deployment", Resource: def.Deployment.Resource, URL: st.Value(d.URL), Revision: st.Value(d.Revision)}
	}
	return set
}
