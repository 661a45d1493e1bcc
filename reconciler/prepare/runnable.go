package prepare

// What a `runnable: true` step stamps (seed 000) instead of the object its
// template rendered: a ClusterRunTemplate holding the template with every
// tag turned into a read of the Runnable's inputs, and a Runnable (owned by
// the owner, in its namespace) whose inputs are the tags' values now. The
// controller (reconciler/owner/runnablestep.go) writes them; `kontinue
// diff` compares them with the live ones. Pure, like the rest of prepare.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/step"
)

// AnnotationGeneratedFor names, on a generated ClusterRunTemplate, the owner
// and step it serves (for people: decisions use the owner's record).
const AnnotationGeneratedFor = "kontinue.dev/generated-for"

// ServiceAccount is the account an owner's steps stamp with: the owner's
// spec.serviceAccountName, else its chain's serviceAccountRef (in the
// owner's namespace when it names none), else default.
func ServiceAccount(namespace string, spec api.OwnerSpec, chain *api.ChainSpec) api.ServiceAccountRef {
	if spec.ServiceAccountName != "" {
		return api.ServiceAccountRef{Namespace: namespace, Name: spec.ServiceAccountName}
	}
	if chain != nil && chain.ServiceAccountRef != nil && chain.ServiceAccountRef.Name != "" {
		ref := *chain.ServiceAccountRef
		if ref.Namespace == "" {
			ref.Namespace = namespace
		}
		return ref
	}
	return api.ServiceAccountRef{Namespace: namespace, Name: "default"}
}

// Runnable is what the runnable: true step def, prepared as p (its first
// object the one the template rendered), stamps for owner: the
// ClusterRunTemplate (the template with every tag a read of the Runnable's
// inputs, the template's outputs and success rule) and the Runnable (the
// tags' values now, as sa, controlled by the owner). The refusal says why
// they cannot be generated (the step's ResourceSubmitted is then False).
func Runnable(ctx context.Context, f *api.Flavor, owner *unstructured.Unstructured, sa api.ServiceAccountRef, def api.Step, p Prepared) (crt, rn *unstructured.Unstructured, refused *Refusal) {
	if p.Spec == nil || len(p.Objects) == 0 {
		return nil, nil, refuse(step.ReasonStampFailure, "step [%s] rendered no object to generate a Runnable from", def.Name)
	}
	rendered := p.Objects[0]
	ns, name := owner.GetNamespace(), owner.GetName()
	translated, exprs := translateTemplate(p.Spec.Template)

	// The inputs are the tags' values now, rendered in the step's context.
	inputsTmpl := map[string]any{}
	for _, e := range exprs {
		inputsTmpl[e] = "$(" + e + ")$"
	}
	tc := render.NewContext(f.OwnerKind, owner.Object, p.Params, p.Inputs, p.Labels)
	values, err := render.Simple().Render(ctx, &api.TemplateSpec{Template: map[string]any{"apiVersion": "v1", "kind": "Inputs", "inputs": inputsTmpl}}, tc)
	if err != nil {
		return nil, nil, refuse(step.ReasonStampFailure, "unable to compute the Runnable inputs of step [%s] from template [%s/%s]: %v", def.Name, p.Kind, p.Template, err)
	}
	inputs, _ := values[0].Object["inputs"].(map[string]any)

	if sa.Namespace != ns {
		return nil, nil, refuse(step.ReasonServiceAccountError, "step [%s] sets runnable: true, but its service account [%s/%s] is not in the %s's namespace; a Runnable can only use an account of its own namespace", def.Name, sa.Namespace, sa.Name, f.OwnerKind)
	}
	crtName := RunTemplateName(f.OwnerKind, ns, name, def.Name)
	crt = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Group + "/" + api.Version, "kind": api.KindClusterRunTemplate,
		"metadata": map[string]any{"name": crtName},
		"spec":     map[string]any{"template": translated},
	}}
	if outs := step.RunnableOutputs(p.Kind, p.Spec); outs != nil {
		m := map[string]any{}
		for k, v := range outs {
			m[k] = v
		}
		_ = unstructured.SetNestedField(crt.Object, m, "spec", "outputs")
	}
	// The template's rule judges every run (the CRD requires one).
	if crit := p.Spec; step.HasRunCriterion(crit) {
		rule, err := runtimeJSON(api.RunTemplateSpec{HealthRule: crit.HealthRule, ObservedCompletion: crit.ObservedCompletion, ObservedMatches: crit.ObservedMatches})
		if err != nil {
			return nil, nil, refuse(step.ReasonStampFailure, "unable to copy the success rule of template [%s/%s] for step [%s]: %v", p.Kind, p.Template, def.Name, err)
		}
		for _, k := range []string{"healthRule", "observedCompletion", "observedMatches"} {
			if v, ok := rule[k]; ok {
				_ = unstructured.SetNestedField(crt.Object, v, "spec", k)
			}
		}
	}
	crt.SetLabels(p.Labels)
	crt.SetAnnotations(map[string]string{AnnotationGeneratedFor: fmt.Sprintf("%s %s/%s step %s", f.OwnerKind, ns, name, def.Name)})

	rnName := rendered.GetName()
	if rnName == "" {
		rnName = name + "-" + def.Name
	}
	spec := map[string]any{
		"runTemplateRef":     map[string]any{"kind": api.KindClusterRunTemplate, "name": crtName},
		"inputs":             inputs,
		"serviceAccountName": sa.Name,
	}
	if rp := p.Spec.RetentionPolicy; rp != nil {
		spec["retentionPolicy"] = map[string]any{"maxFailedRuns": rp.MaxFailedRuns, "maxSuccessfulRuns": rp.MaxSuccessfulRuns}
	}
	rn = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Group + "/" + api.Version, "kind": api.KindRunnable,
		"metadata": map[string]any{"name": rnName, "namespace": ns},
		"spec":     spec,
	}}
	rn.SetLabels(p.Labels)
	rn.SetOwnerReferences([]metav1.OwnerReference{ControllerReference(f, owner)})
	return crt, rn, nil
}

// RunTemplateName is the name of the ClusterRunTemplate generated for an
// owner's step, unique per owner kind, namespace, owner and step: readable
// parts, then a hash of all of them (so that "a-b"/"c" and "a"/"b-c"
// cannot collide), within the 253 characters of a name.
func RunTemplateName(ownerKind, ns, owner, step string) string {
	sum := sha256.Sum256([]byte(ownerKind + "/" + ns + "/" + owner + "/" + step))
	h := hex.EncodeToString(sum[:])[:10]
	var b strings.Builder
	for _, c := range strings.ToLower(ns + "-" + owner + "-" + step) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	base := b.String()
	if limit := 253 - len(h) - 1; len(base) > limit {
		base = base[:limit]
	}
	base = strings.Trim(base, "-.")
	if base == "" {
		return "run-" + h
	}
	return base + "-" + h
}

// runtimeJSON is v as a JSON object of unstructured values.
func runtimeJSON(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, jsonvalue.Unmarshal(b, &m)
}

// quoteKey makes an input name usable inside a path's ['…'].
var quoteKey = strings.NewReplacer(`\`, `\\`, `'`, `\'`)

// translateTemplate returns a deep copy of tmpl in which every tag $(e)$ of
// a string leaf reads $(runnable.spec.inputs['e'])$, and the tag
// expressions found (trimmed, sorted, unique). metadata.name becomes
// metadata.generateName (name + "-"): each input set is a new object.
func translateTemplate(tmpl map[string]any) (map[string]any, []string) {
	seen := map[string]bool{}
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case string:
			return translateLeaf(t, seen)
		case map[string]any:
			out := make(map[string]any, len(t))
			for k, e := range t {
				out[k] = walk(e)
			}
			return out
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				out[i] = walk(e)
			}
			return out
		}
		return v
	}
	out := walk(tmpl).(map[string]any)
	if md, ok := out["metadata"].(map[string]any); ok {
		if name, ok := md["name"].(string); ok && name != "" {
			if _, has := md["generateName"]; !has {
				md["generateName"] = name + "-"
			}
			delete(md, "name")
		}
	}
	exprs := make([]string, 0, len(seen))
	for e := range seen {
		exprs = append(exprs, e)
	}
	sort.Strings(exprs)
	return out, exprs
}

// translateLeaf rewrites the tags of one string. Tags run from "$(" to the
// first ")$", as in the engine; the template already rendered, so the
// syntax is known to be good.
func translateLeaf(s string, seen map[string]bool) string {
	return render.RewriteTags(s, func(expr string) string {
		expr = strings.TrimSpace(expr)
		seen[expr] = true
		return "runnable.spec.inputs['" + quoteKey.Replace(expr) + "']"
	})
}
