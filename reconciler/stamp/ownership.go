package stamp

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/annotations"
)

// Owner identifies the Workload, Deliverable or Runnable a step stamps for.
type Owner struct {
	Kind string
	Name string
	UID  types.UID
}

// Claim decides whether owner may write to live, an object that exists
// under the name its template stamps: only if owner stamped it (its
// controller reference names owner's UID: labels anyone can set are not
// proof), or if the object carries AdoptBy naming owner, which only someone
// allowed to write the object can have put there. Otherwise it returns why
// not, naming the object and who controls it: writing would take over
// someone else's object, and the garbage collector would delete it with
// the owner.
func Claim(live *unstructured.Unstructured, owner Owner) (ok bool, why string) {
	if live == nil {
		return true, ""
	}
	ctrl := metav1.GetControllerOfNoCopy(live)
	if ctrl != nil && ctrl.UID == owner.UID {
		return true, ""
	}
	if live.GetAnnotations()[annotations.AdoptBy] == owner.Kind+"/"+owner.Name {
		return true, ""
	}
	what := fmt.Sprintf("%s [%s/%s]", live.GetKind(), live.GetNamespace(), live.GetName())
	if ctrl != nil {
		return false, fmt.Sprintf("%s already exists and is controlled by %s [%s]; Kontinue does not take over objects it did not stamp for this %s",
			what, ctrl.Kind, ctrl.Name, owner.Kind)
	}
	return false, fmt.Sprintf("%s already exists and was not stamped by this %s; Kontinue does not take it over (to hand it to %s [%s], annotate it %s=%s/%s)",
		what, owner.Kind, owner.Kind, owner.Name, annotations.AdoptBy, owner.Kind, owner.Name)
}
