package cli

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
)

// RunsNotPreviewed is the note on a runnable: true step whose generated
// objects change: what they make next is the Runnable controller's.
const RunsNotPreviewed = "its runs are not previewed: the Runnable creates a new run from the ClusterRunTemplate once what a run renders changes, " +
	"and the step passes on the outputs of its last successful run until a new one succeeds"

// previewRunnable compares what a runnable: true step would stamp, the
// ClusterRunTemplate and Runnable the controller generates
// (prepare.Runnable, the controller's own code), with the live ones.
func previewRunnable(ctx context.Context, newEnv prepare.Env, oldEnv *prepare.Env, def api.Step, p prepare.Prepared, old *prepare.Prepared,
	live []*unstructured.Unstructured) ([]objdiff.Object, *prepare.Refusal) {
	generate := func(env prepare.Env, p prepare.Prepared) ([]*unstructured.Unstructured, *prepare.Refusal) {
		sa := prepare.ServiceAccount(env.Owner.GetNamespace(), env.OwnerSpec, env.Chain)
		crt, rn, r := prepare.Runnable(render.WithSchema(ctx, env.Schema), env.Flavor, env.Owner, sa, def, p)
		if r != nil {
			return nil, r
		}
		return []*unstructured.Unstructured{crt, rn}, nil
	}
	objs, r := generate(newEnv, p)
	if r != nil {
		return nil, r
	}
	var oldObjs []*unstructured.Unstructured
	if old != nil && oldEnv != nil && old.Refusal == nil && old.Spec != nil && old.Spec.Runnable {
		oldObjs, _ = generate(*oldEnv, *old) // only the shape of what the live objects were applied with
	}
	out, err := compareStep(def.Name, false, objs, oldObjs, live)
	if err != nil {
		return nil, &prepare.Refusal{Reason: "DiffFailed", Message: err.Error()}
	}
	for i := range out {
		if out[i].Op != objdiff.OpRemoved {
			out[i].Note = RunsNotPreviewed
			break
		}
	}
	return out, nil
}

// liveRunTemplate is the ClusterRunTemplate the controller generated for
// the owner's step: the owner's status records it (generatedRunTemplates,
// not stampedObjects), and only the object of the recorded UID is
// Kontinue's; nil when there is none (yet, or someone else's object holds
// the name: the controller leaves that alone).
func (pv *previewer) liveRunTemplate(ctx context.Context, f *api.Flavor, owner *unstructured.Unstructured, recs []st.GeneratedRunTemplate, step string) (*unstructured.Unstructured, error) {
	name := prepare.RunTemplateName(f.OwnerKind, owner.GetNamespace(), owner.GetName(), step)
	for _, rec := range recs {
		if rec.Step != step || rec.Name != name {
			continue
		}
		o, err := pv.stamped.get(ctx, st.StampedRef{APIVersion: api.Group + "/" + api.Version, Kind: api.KindClusterRunTemplate, Name: name,
			Resource: api.RunTemplateGVR.Resource + "." + api.Group})
		if err != nil {
			return nil, fmt.Errorf("ClusterRunTemplate %s: %w", name, err)
		}
		if o != nil && (rec.UID == "" || o.GetUID() == rec.UID) {
			return o, nil
		}
	}
	return nil, nil
}
