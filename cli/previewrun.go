package cli

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
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
		crt, rn, r := prepare.Runnable(ctx, env.Flavor, env.Owner, sa, def, p)
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
