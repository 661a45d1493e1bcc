package stamp

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
)

// Owner identifies the Workload, Deliverable or Runnable a step stamps for.
type Owner struct {
	Kind string
	Name string
	UID  types.UID
}

// Claimant is who writes an object: one step of one owner. An object
// belongs to one owner and, within it, to one step: two steps writing one
// object would each undo the other's write on every reconcile.
type Claimant struct {
	Owner
	// Step is the step that writes (the api.LabelResourceName it stamps);
	// "": the write is no step's, any step of the owner may have made it.
	Step string
	// Holds says whether step, another step of the owner (the one the
	// object's api.LabelResourceName names), still stamps live, the
	// object: it is a step of the owner's chain and renders that object. A
	// step that left the chain (renamed, removed) or is known to render
	// another name now holds nothing, so that its successor takes the
	// object over. nil: every step named holds what it labelled.
	Holds func(step string, live *unstructured.Unstructured) bool
}

// Claim decides whether c may write to live, an object that exists under
// the name its template stamps: only if c's owner stamped it (its
// controller reference names the owner's UID: labels anyone can set are not
// proof) and no other step of the owner still stamps it, or if the object
// carries AdoptBy naming the owner, which only someone allowed to write the
// object can have put there. Otherwise it returns why not, naming the
// object and who controls it: writing would take over someone else's
// object (the garbage collector would delete it with the owner), or make
// two steps flip one object back and forth.
//
// Objects stamped by earlier versions of Kontinue and by Cartographer carry
// the same controller reference and step label (carto.run/resource-name),
// so a migration keeps its objects; an object without the label is the
// owner's step's whichever step writes it.
func Claim(live *unstructured.Unstructured, c Claimant) (ok bool, why string) {
	if err := claim(live, c); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// HeldByStep is why a step may not write an object: another step of the
// same owner, Step, stamps it. UID and Version are the object's, as it
// was judged.
type HeldByStep struct {
	Step    string
	UID     types.UID
	Version string
	why     string
}

func (e *HeldByStep) Error() string { return e.why }

// claim is Claim's refusal as an error (a *HeldByStep when another step
// of the owner holds the object); nil when c may write live.
func claim(live *unstructured.Unstructured, c Claimant) error {
	if live == nil {
		return nil
	}
	what := fmt.Sprintf("%s [%s/%s]", live.GetKind(), live.GetNamespace(), live.GetName())
	ctrl := metav1.GetControllerOfNoCopy(live)
	if ctrl != nil && ctrl.UID == c.UID {
		other := live.GetLabels()[api.LabelResourceName]
		if c.Step == "" || other == "" || other == c.Step || (c.Holds != nil && !c.Holds(other, live)) {
			return nil
		}
		return &HeldByStep{Step: other, UID: live.GetUID(), Version: live.GetResourceVersion(), why: fmt.Sprintf("%s is stamped by step [%s] of this %s, which still stamps it: step [%s] renders an object of the same name, and one object belongs to one step (give one of them another name)",
			what, other, c.Kind, c.Step)}
	}
	if live.GetAnnotations()[annotations.AdoptBy] == c.Kind+"/"+c.Name {
		return nil
	}
	if ctrl != nil {
		return fmt.Errorf("%s already exists and is controlled by %s [%s]; Kontinue does not take over objects it did not stamp for this %s",
			what, ctrl.Kind, ctrl.Name, c.Kind)
	}
	return fmt.Errorf("%s already exists and was not stamped by this %s; Kontinue does not take it over (to hand it to %s [%s], annotate it %s=%s/%s)",
		what, c.Kind, c.Kind, c.Name, annotations.AdoptBy, c.Kind, c.Name)
}

// Stamps reports whether live is what c stamped (Claim without the hand
// over of AdoptBy): only such an object may hold c's step or lend it
// health.
func Stamps(live *unstructured.Unstructured, c Claimant) bool {
	if live == nil {
		return false
	}
	if ctrl := metav1.GetControllerOfNoCopy(live); ctrl == nil || ctrl.UID != c.UID {
		return false
	}
	return claim(live, c) == nil
}
