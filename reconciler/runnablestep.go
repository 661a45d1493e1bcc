package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// `runnable: true` (seed 000): instead of stamping the template's object,
// Kontinue generates a ClusterRunTemplate holding the template with every
// tag turned into a read of the Runnable's inputs, and a Runnable (owned by
// the owner, in its namespace) whose inputs are the tags' current values.
// The Runnable controller then creates a new object per input set, and the
// step reads its outputs from the Runnable's status.outputs.
//
// The ClusterRunTemplate is cluster-scoped, so it cannot have a namespaced
// owner reference: its name embeds a hash of owner kind, namespace, name and
// step (unique across namespaces), its labels name the owner and step, and
// Kontinue deletes it when the step stops generating it (owner reconcile) or
// the owner is gone (a sweep on owner deletion and at start). It is written
// with Kontinue's own identity: it is Kontinue's bookkeeping, derived from a
// template the platform wrote, and a namespaced service account could not
// be granted a cluster-scoped kind through a RoleBinding anyway. The
// Runnable, and every run it creates, use the stamping service account.

// AnnotationGeneratedFor names, on a generated ClusterRunTemplate, the owner
// and step it serves (for people; decisions use the labels).
const AnnotationGeneratedFor = "kontinue.dev/generated-for"

// generatedRunTemplateName is unique per owner kind, namespace, owner and
// step: readable parts, then a hash of all of them (so that "a-b"/"c" and
// "a"/"b-c" cannot collide), within the 253 characters of a name.
func generatedRunTemplateName(ownerKind, ns, owner, step string) string {
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
	return m, json.Unmarshal(b, &m)
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

// How runnable: true steps write: the generated ClusterRunTemplate (as
// Kontinue) and Runnable (as the stamping service account) applied in
// place. load generates them; the Strategy applies them in that order.
type runnableWriter struct {
	noRuns
	op *ownerPass
	sc *stepCtx
}

func newRunnableWriter(op *ownerPass, sc *stepCtx) stepWriter { return &runnableWriter{op: op, sc: sc} }

// load generates the ClusterRunTemplate and the Runnable from the rendered
// object (Observed.Objects becomes them, the Runnable primary) and watches
// the Runnable.
func (w *runnableWriter) load(o *step.Observed) (step.Seen, *stepResult) {
	op, sc := w.op, w.sc
	fail := func(s metav1.ConditionStatus, reason, format string, args ...any) (step.Seen, *stepResult) {
		r := op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, s, reason, fmt.Sprintf(format, args...)), nil)
		return step.Seen{}, &r
	}
	ns, owner := op.owner.GetNamespace(), op.owner.GetName()
	translated, exprs := translateTemplate(sc.spec.Template)

	// The inputs are the tags' values now, rendered in the step's context.
	inputsTmpl := map[string]any{}
	for _, e := range exprs {
		inputsTmpl[e] = "$(" + e + ")$"
	}
	params := render.MergeParams(sc.spec.Params, op.chain.spec.Params, sc.step.Params, op.spec.Params)
	tc := render.NewContext(op.r.flavor.OwnerKind, op.owner.Object, params, sc.in, op.stepLabels(sc))
	rendered, err := render.Simple().Render(op.ctx, &api.TemplateSpec{Template: map[string]any{"apiVersion": "v1", "kind": "Inputs", "inputs": inputsTmpl}}, tc)
	if err != nil {
		return fail(st.False, step.ReasonStampFailure, "unable to compute the Runnable inputs of step [%s] from template [%s/%s]: %v", sc.step.Name, sc.kind, sc.tmplName, err)
	}
	inputs, _ := rendered[0].Object["inputs"].(map[string]any)

	sa := op.serviceAccount()
	if sa.Namespace != ns {
		return fail(st.False, step.ReasonServiceAccountError, "step [%s] sets runnable: true, but its service account [%s/%s] is not in the %s's namespace; a Runnable can only use an account of its own namespace", sc.step.Name, sa.Namespace, sa.Name, op.r.flavor.OwnerKind)
	}
	labels := op.stepLabels(sc)
	crtName := generatedRunTemplateName(op.r.flavor.OwnerKind, ns, owner, sc.step.Name)
	crt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Group + "/" + api.Version, "kind": api.KindClusterRunTemplate,
		"metadata": map[string]any{"name": crtName},
		"spec":     map[string]any{"template": translated},
	}}
	if outs := step.RunnableOutputs(sc.kind, sc.spec); outs != nil {
		m := map[string]any{}
		for k, v := range outs {
			m[k] = v
		}
		_ = unstructured.SetNestedField(crt.Object, m, "spec", "outputs")
	}
	// The template's rule judges every run (the CRD requires one).
	if crit := sc.spec; step.HasRunCriterion(crit) {
		rule, err := runtimeJSON(api.RunTemplateSpec{HealthRule: crit.HealthRule, ObservedCompletion: crit.ObservedCompletion, ObservedMatches: crit.ObservedMatches})
		if err != nil {
			return fail(st.False, step.ReasonStampFailure, "unable to copy the success rule of template [%s/%s] for step [%s]: %v", sc.kind, sc.tmplName, sc.step.Name, err)
		}
		for _, k := range []string{"healthRule", "observedCompletion", "observedMatches"} {
			if v, ok := rule[k]; ok {
				_ = unstructured.SetNestedField(crt.Object, v, "spec", k)
			}
		}
	}
	crt.SetLabels(labels)
	crt.SetAnnotations(map[string]string{AnnotationGeneratedFor: fmt.Sprintf("%s %s/%s step %s", op.r.flavor.OwnerKind, ns, owner, sc.step.Name)})

	name := o.Objects[0].GetName()
	if name == "" {
		name = owner + "-" + sc.step.Name
	}
	spec := map[string]any{
		"runTemplateRef":     map[string]any{"kind": api.KindClusterRunTemplate, "name": crtName},
		"inputs":             inputs,
		"serviceAccountName": sa.Name,
	}
	if rp := sc.spec.RetentionPolicy; rp != nil {
		spec["retentionPolicy"] = map[string]any{"maxFailedRuns": rp.MaxFailedRuns, "maxSuccessfulRuns": rp.MaxSuccessfulRuns}
	}
	rn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.Group + "/" + api.Version, "kind": api.KindRunnable,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	rn.SetLabels(labels)
	rn.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: api.Group + "/" + api.Version, Kind: op.r.flavor.OwnerKind,
		Name: owner, UID: op.owner.GetUID(), Controller: ptr.To(true),
	}})
	o.Objects, o.Primary = []*unstructured.Unstructured{crt, rn}, 1
	o.Desired, o.Digest = rn, ""
	op.watch.Watch(tracking.Key{GVR: RunnableGVR, Selector: StampedSelector})
	op.keep.ref(w.ref(rn))
	return step.Seen{}, nil
}

// write applies the generated objects in the Plan's order.
func (w *runnableWriter) write(_ step.Observed, p step.Plan) (step.Got, *stepResult) {
	var got step.Got
	for _, u := range p.Apply {
		gvr, key, asSA := RunTemplateGVR, tracking.Key{GVR: RunTemplateGVR}, false
		if u.GetKind() == api.KindRunnable {
			gvr, key, asSA = RunnableGVR, tracking.Key{GVR: RunnableGVR, Selector: StampedSelector}, true
		}
		r, ok := w.op.applyGenerated(w.sc, gvr, key, u, asSA)
		if !ok {
			return got, &r.stepResult
		}
		got.Live, got.Refs = append(got.Live, r.live), append(got.Refs, w.ref(u))
	}
	return got, nil
}

func (w *runnableWriter) ref(u *unstructured.Unstructured) st.StampedRef {
	gvr := RunnableGVR
	if u.GetKind() == api.KindClusterRunTemplate {
		gvr = RunTemplateGVR
	}
	return st.StampedRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Resource: resourceString(gvr)}
}

type appliedGenerated struct {
	stepResult
	live *unstructured.Unstructured
}

// applyGenerated applies a generated object unless the cached one already
// has it: the Runnable as the stamping service account, the
// ClusterRunTemplate as Kontinue (see the package comment above).
func (op *ownerPass) applyGenerated(sc *stepCtx, gvr schema.GroupVersionResource, key tracking.Key, desired *unstructured.Unstructured, asServiceAccount bool) (appliedGenerated, bool) {
	what := fmt.Sprintf("%s [%s] for step [%s] (template [%s/%s] sets runnable: true)", desired.GetKind(), desired.GetName(), sc.step.Name, sc.kind, sc.tmplName)
	var watch stamp.Watch // the ClusterRunTemplate watch is permanent
	if key.Selector != "" {
		watch = op.watch.Watch
	}
	cached, err := op.w.Live(op.ctx, key, watch, desired.GetNamespace(), desired.GetName())
	if err == nil && cached != nil && desired.GetNamespace() == "" {
		// Never take over a ClusterRunTemplate someone else wrote.
		l := cached.GetLabels()
		if l[op.r.flavor.LabelOwnerName] != op.owner.GetName() || l[op.r.flavor.LabelOwnerNS] != op.owner.GetNamespace() {
			c := st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, fmt.Sprintf("unable to apply %s: a ClusterRunTemplate of that name exists and was not generated for this step", what))
			return appliedGenerated{stepResult: op.stepDone(sc, nil, c, nil)}, false
		}
	}
	cl := op.r.m.dyn
	if asServiceAccount {
		if cl, err = op.stampClient(); err != nil {
			c := st.Cond(st.ResourceSubmitted, st.False, step.ReasonServiceAccountError, err.Error())
			return appliedGenerated{stepResult: op.stepDone(sc, nil, c, nil)}, false
		}
	}
	var live *unstructured.Unstructured
	var wrote bool
	var c *metav1.Condition
	if asServiceAccount {
		// A stamped object like any other: created first, never taken over.
		live, wrote, c, err = op.put(cl, gvr, what, desired, cached)
	} else if live, wrote, err = op.w.Apply(op.ctx, cl, gvr, desired, cached); err != nil {
		cond, transient := op.applyFailure(what, err)
		c, err = &cond, transient
	}
	if c != nil {
		r := op.stepDone(sc, nil, *c, nil)
		r.err = err
		return appliedGenerated{stepResult: r}, false
	}
	if wrote {
		op.r.m.w.Events.Event(op.owner, corev1.EventTypeNormal, stamp.EventStampedObjectApplied, "Applied %s %s for step [%s]", live.GetKind(), apply.Describe(live), sc.step.Name)
	}
	return appliedGenerated{live: live}, true
}

// removeStaleRunTemplates deletes the ClusterRunTemplates generated for this
// owner whose step no longer generates one (removed, renamed, runnable
// false), unless the step failed before reaching its Runnable and still
// points at it. Called only when the steps were realized.
func (op *ownerPass) removeStaleRunTemplates() error {
	current := map[string]*st.StampedRef{}
	for i := range op.status.Resources {
		current[op.status.Resources[i].Name] = op.status.Resources[i].StampedRef
	}
	var firstErr error
	for _, name := range op.r.m.runnables.generatedFor(op.r.key(op.owner.GetNamespace(), op.owner.GetName())) {
		crt, _ := op.r.m.tracker.Get(tracking.Key{GVR: RunTemplateGVR}, "", name)
		if crt == nil {
			continue
		}
		step := crt.GetLabels()[LabelResourceName]
		if op.keep.reached[step] && name == generatedRunTemplateName(op.r.flavor.OwnerKind, op.owner.GetNamespace(), op.owner.GetName(), step) {
			continue // generated this time
		}
		if ref := current[step]; ref != nil && ref.Kind == api.KindRunnable && !op.keep.reached[step] {
			continue // failed early this time: keep it
		}
		if err := op.r.m.runnables.deleteRunTemplate(op.ctx, crt, fmt.Sprintf("step [%s] of %s %s/%s no longer generates it", step, op.r.flavor.OwnerKind, op.owner.GetNamespace(), op.owner.GetName())); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// generatedFor lists the ClusterRunTemplates generated for an owner (from
// the index the watch keeps).
func (r *runnableReconciler) generatedFor(owner Key) []string {
	r.selMu.Lock()
	defer r.selMu.Unlock()
	return slices.Sorted(maps.Keys(r.genByOwner[owner]))
}

// indexGenerated keeps the owner → generated ClusterRunTemplates index and
// returns the owner of a generated run template (false if not one).
func (r *runnableReconciler) indexGenerated(ev tracking.Event) (Key, bool) {
	owner, generated := generatedOwner(ev.Obj)
	r.selMu.Lock()
	defer r.selMu.Unlock()
	name := ev.Obj.GetName()
	if old, ok := r.genOwnerOf[name]; ok && (ev.Type == tracking.Deleted || old != owner) {
		removeFrom(r.genByOwner, old, name)
		delete(r.genOwnerOf, name)
	}
	if ev.Type != tracking.Deleted && generated {
		addTo(r.genByOwner, owner, name)
		r.genOwnerOf[name] = owner
	}
	return owner, generated
}

// generatedOwner is the owner a generated ClusterRunTemplate's labels name.
func generatedOwner(crt *unstructured.Unstructured) (Key, bool) {
	l := crt.GetLabels()
	if l[StampedLabel] != "true" {
		return Key{}, false
	}
	for _, f := range []*Flavor{WorkloadFlavor, DeliverableFlavor} {
		if n, ns := l[f.LabelOwnerName], l[f.LabelOwnerNS]; n != "" && ns != "" {
			return Key{Kind: f.OwnerKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: n}}, true
		}
	}
	return Key{}, false
}

// sweep deletes a generated ClusterRunTemplate whose owner is gone. Its key
// comes from the run template's watch (every one is seen at start) and from
// owner deletions.
func (r *runnableReconciler) sweep(ctx context.Context, name string) (Result, error) {
	crt, synced := r.m.tracker.Get(tracking.Key{GVR: RunTemplateGVR}, "", name)
	if !synced {
		return Result{RequeueAfter: time.Second, Wait: true}, nil
	}
	if crt == nil {
		return Result{}, nil
	}
	owner, ok := generatedOwner(crt)
	if !ok {
		return Result{}, nil
	}
	f := WorkloadFlavor
	if owner.Kind == DeliverableFlavor.OwnerKind {
		f = DeliverableFlavor
	}
	o, synced := r.m.tracker.Get(tracking.Key{GVR: f.OwnerGVR}, owner.Namespace, owner.Name)
	if !synced {
		return Result{RequeueAfter: time.Second, Wait: true}, nil
	}
	if o != nil {
		return Result{}, nil // the owner's reconcile decides
	}
	return Result{}, r.deleteRunTemplate(ctx, crt, fmt.Sprintf("%s %s/%s is gone", owner.Kind, owner.Namespace, owner.Name))
}

// deleteRunTemplate deletes a generated ClusterRunTemplate (UID precondition).
func (r *runnableReconciler) deleteRunTemplate(ctx context.Context, crt *unstructured.Unstructured, why string) error {
	err := r.m.w.Delete(ctx, r.m.dyn, RunTemplateGVR, "", crt.GetName(), crt.GetUID())
	if err == nil {
		klog.InfoS("removed generated ClusterRunTemplate", "name", crt.GetName(), "why", why)
	}
	return err
}
