package e2e

// The chart's admission policy for shards (deploy/chart/templates/
// shardpolicy.yaml, docs/operations.md#sharding): an owner whose
// kontinue.dev/shard label is empty or names a shard no replica serves is
// refused, on create and when the label changes, by the API server itself
// (a ValidatingAdmissionPolicy, no webhook).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/hack/installyaml/render"
)

// shardPolicy renders the chart with shards blue and green and returns its
// policy and binding, renamed for the test and bound to namespace ns only
// (the suite's other tests label owners for shards of their own).
func shardPolicy(t *testing.T, ns string, defaultShard bool) []*unstructured.Unstructured {
	t.Helper()
	docs, err := render.RenderChart(env.root, map[string]any{"sharding": map[string]any{"shards": []any{"blue", "green"}, "defaultShard": defaultShard}})
	require.NoError(t, err)
	name := uniq(ns, "kontinue-shards")
	var out []*unstructured.Unstructured
	for _, d := range docs {
		o := obj(d)
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
		case "ValidatingAdmissionPolicyBinding":
			require.NoError(t, unstructured.SetNestedField(o.Object, name, "spec", "policyName"))
			require.NoError(t, unstructured.SetNestedStringMap(o.Object, map[string]string{"kubernetes.io/metadata.name": ns},
				"spec", "matchResources", "namespaceSelector", "matchLabels"))
		default:
			continue
		}
		o.SetName(name)
		out = append(out, o)
	}
	require.Len(t, out, 2, "a policy and its binding")
	return out
}

// shardOwner is a Workload, Deliverable or Runnable named name, labelled
// kontinue.dev/shard=shard (no label when shard is nil).
func shardOwner(kind, name string, shard *string) *unstructured.Unstructured {
	spec := map[string]any{}
	if kind == "Runnable" {
		spec["runTemplateRef"] = map[string]any{"name": "none"}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec}}
	if shard != nil {
		u.SetLabels(map[string]string{shardLabel: *shard, "app": "x"})
	}
	return u
}

// TestShardAdmissionPolicy applies the chart's policy (shards blue and
// green) and creates and edits Workloads, Deliverables and Runnables with
// good, empty, unknown and missing labels: the API server refuses exactly
// those no replica would serve, with the policy's message, and lets an
// owner already in a shard that left the list be edited.
func TestShardAdmissionPolicy(t *testing.T) {
	for _, defaultShard := range []bool{true, false} {
		t.Run(fmt.Sprintf("defaultShard=%v", defaultShard), func(t *testing.T) {
			ns := newNamespace(t)
			ctx := context.Background()
			gvr := map[string]schema.GroupVersionResource{"Workload": workloadGVR, "Deliverable": deliverableGVR, "Runnable": immRunnableGVR}
			create := func(u *unstructured.Unstructured, dryRun bool) error {
				opts := metav1.CreateOptions{}
				if dryRun {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				_, err := env.dyn.Resource(gvr[u.GetKind()]).Namespace(ns).Create(ctx, u, opts)
				return err
			}
			// Before the policy: an owner of a shard since removed, and one
			// without the label.
			require.NoError(t, create(shardOwner("Workload", "left", ptr("gone")), false))
			require.NoError(t, create(shardOwner("Workload", "plain", nil), false))

			for _, o := range shardPolicy(t, ns, defaultShard) {
				apply(t, "", toYAML(t, o))
			}
			const (
				emptyMsg   = "the label kontinue.dev/shard is empty, which no Kontinue replica serves"
				unknownMsg = " names no shard a Kontinue replica serves (blue, green)"
				missingMsg = "no Kontinue replica serves owners without the label kontinue.dev/shard: name a shard (blue, green)"
			)
			refused := func(err error, msg string) string {
				switch {
				case err == nil:
					return "accepted"
				case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg):
					return "refused, but not with " + msg + ": " + err.Error()
				}
				return ""
			}
			// The admission plugin learns of a new policy through an informer.
			eventually(t, 30*time.Second, func() string {
				return refused(create(shardOwner("Workload", "probe", ptr("")), true), emptyMsg)
			})

			for _, kind := range []string{"Workload", "Deliverable", "Runnable"} {
				for _, tc := range []struct {
					shard *string
					msg   string // "": accepted
				}{
					{ptr("blue"), ""},
					{ptr("green"), ""},
					{ptr(""), emptyMsg},
					{ptr("red"), "kontinue.dev/shard=red" + unknownMsg},
					{ptr("Not_A_Label"), "kontinue.dev/shard=Not_A_Label" + unknownMsg},
					{nil, map[bool]string{true: "", false: missingMsg}[defaultShard]},
				} {
					err := create(shardOwner(kind, "x", tc.shard), true)
					where := fmt.Sprintf("%s labelled %v", kind, tc.shard)
					if tc.shard != nil {
						where = fmt.Sprintf("%s labelled %q", kind, *tc.shard)
					}
					if tc.msg == "" {
						require.NoError(t, err, where)
					} else {
						require.Empty(t, refused(err, tc.msg), where)
					}
				}
			}

			// Changing the label is checked like a create.
			require.NoError(t, create(shardOwner("Workload", "app", ptr("blue")), false))
			// A merge patch (an UPDATE for admission): the suite's Kontinue
			// writes the owners of the default shard meanwhile.
			patch := func(name string, metadata map[string]any) error {
				b, err := json.Marshal(map[string]any{"metadata": metadata})
				require.NoError(t, err)
				_, err = env.dyn.Resource(workloadGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
				return err
			}
			relabel := func(name string, shard *string) error {
				var v any // nil removes the label
				if shard != nil {
					v = *shard
				}
				return patch(name, map[string]any{"labels": map[string]any{shardLabel: v}})
			}
			require.Empty(t, refused(relabel("app", ptr("red")), "kontinue.dev/shard=red"+unknownMsg))
			require.Empty(t, refused(relabel("app", ptr("")), emptyMsg))
			require.NoError(t, relabel("app", ptr("green")), "moved to another shard")
			if defaultShard {
				require.NoError(t, relabel("app", nil), "moved to the default shard")
				require.NoError(t, relabel("app", ptr("blue")), "and back")
			} else {
				require.Empty(t, refused(relabel("app", nil), missingMsg))
			}

			// An owner already where no replica serves it can be edited
			// (finalizers, annotations) and moved to a served shard, not to
			// another unserved one.
			for _, name := range []string{"left", "plain"} {
				require.NoError(t, patch(name, map[string]any{"annotations": map[string]any{"note": "edited"}}), "%s: the label did not change", name)
			}
			require.Empty(t, refused(relabel("left", ptr("gone-too")), "kontinue.dev/shard=gone-too"+unknownMsg))
			require.NoError(t, relabel("left", ptr("blue")))

			// An empty label is refused on an owner that had none.
			require.Empty(t, refused(relabel("plain", ptr("")), emptyMsg))
		})
	}
}
