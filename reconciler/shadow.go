package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/render"
)

// Shadow objects (seed 004): when bad inputs make a step's object fail, a
// copy stamped from the last input set that succeeded keeps receiving
// external updates (a rebased image), and downstream steps are fed from it
// until the primary succeeds again.
const (
	// ShadowLabel marks a shadow object.
	ShadowLabel  = "kontinue.dev/shadow"
	shadowSuffix = "-last-good"
	maxNameLen   = 63 // the strictest name rule among common kinds (DNS label)
)

// Values of status.resources[].servedBy.
const (
	ServedByPrimary = "primary"
	ServedByShadow  = "shadow"
)

// shadowCapable: the template says what failure is (without it Kontinue
// cannot tell a failed primary), the object is updated in place (immutable
// runs keep their old good run anyway), and the template did not opt out.
// A deployment template passes its input through: a copy adds nothing.
func shadowCapable(kind string, spec *api.TemplateSpec) bool {
	if kind == api.KindClusterDeploymentTemplate || (spec.Shadow != nil && !*spec.Shadow) {
		return false
	}
	if spec.Lifecycle != "" && spec.Lifecycle != api.LifecycleMutable {
		return false
	}
	return gated(spec) && spec.ObservedCompletion != nil && len(spec.ObservedCompletion.Failed) > 0
}

// shadowName derives a name that cannot collide with the primary's and
// fits the strictest name rule: long names keep a hash of the full name.
func shadowName(primary string) string {
	name := primary + shadowSuffix
	if len(name) <= maxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(primary))
	h := hex.EncodeToString(sum[:4])
	keep := maxNameLen - len(shadowSuffix) - len(h) - 1
	base := strings.TrimRight(primary[:keep], "-.")
	return base + "-" + h + shadowSuffix
}

// objectFromLive recovers what was applied from a live object: its content
// without status and server-set metadata.
func objectFromLive(live *unstructured.Unstructured) map[string]any {
	o := live.DeepCopy().Object
	delete(o, "status")
	if md, ok := o["metadata"].(map[string]any); ok {
		for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers"} {
			delete(md, k)
		}
	}
	return o
}

// shadow keeps the step's shadow in step with the primary and returns the
// Healthy condition to report. It stamps the shadow when the primary failed
// on inputs other than the last good ones; a failure on the very inputs that
// last succeeded comes from outside (external state), and a copy with the
// same inputs would fail the same way, so then there is no shadow.
func (ru *run) shadow(sc *stepCtx, primary *unstructured.Unstructured, h health.Result, primarySucceeded bool, healthy metav1.Condition) metav1.Condition {
	if !shadowCapable(sc.kind, sc.spec) {
		sc.res.ShadowRef, sc.res.ServedBy, sc.res.LastGoodObject = nil, "", nil
		return healthy
	}
	sc.res.ServedBy = ServedByPrimary
	if primarySucceeded {
		sc.res.ShadowRef = nil // no longer kept: removed as an orphan
		return healthy
	}
	badInputs := primary.GetAnnotations()[AnnotationDigest] != sc.goodDigest
	need := sc.res.ShadowRef != nil || (h.Outcome == health.Failed && badInputs)
	if !need || sc.res.LastGoodObject == nil {
		sc.res.ShadowRef = nil
		return healthy
	}
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(sc.res.LastGoodObject)}
	name := shadowName(primary.GetName())
	obj.SetName(name)
	obj.SetGenerateName("")
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ShadowLabel] = "true"
	obj.SetLabels(labels)
	t, cond, err := ru.resolve(sc, obj)
	if cond == nil {
		var live *unstructured.Unstructured
		live, _, cond, err = ru.stampOne(sc, t, obj)
		if cond == nil {
			sc.res.ShadowRef = &t.ref
			doc, jerr := live.MarshalJSON()
			if jerr == nil {
				out, outErr := readOutputs(sc.kind, sc.spec, doc, render.Inputs{})
				hs := health.Evaluate(sc.spec, sc.kind, doc, outErr)
				if hs.Outcome == health.Succeeded && outErr == nil {
					sc.good = out
					sc.res.ServedBy = ServedByShadow
					healthy.Message = fmt.Sprintf("%s; outputs served by shadow %s [%s/%s], stamped from the last good input set %s",
						healthy.Message, live.GetKind(), live.GetNamespace(), live.GetName(), sc.goodDigest)
					return healthy
				}
				healthy.Message = fmt.Sprintf("%s; shadow %s [%s/%s] is not in success yet (%s); downstream keeps the last good outputs",
					healthy.Message, live.GetKind(), live.GetNamespace(), live.GetName(), hs.Message)
				return healthy
			}
		}
	}
	if cond != nil {
		klog.V(1).InfoS("could not stamp shadow", "owner", ru.r.user(ru.owner.GetNamespace(), ru.owner.GetName()), "step", sc.step.Name, "reason", cond.Reason, "message", cond.Message, "err", err)
		healthy.Message = fmt.Sprintf("%s; shadow could not be stamped: %s", healthy.Message, cond.Message)
	}
	return healthy
}
