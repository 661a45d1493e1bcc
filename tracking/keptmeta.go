package tracking

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// keptMeta is the metadata a packed or slimmed object keeps typed: what
// the informer (key, resourceVersion), the indexers (namespace, controller
// reference) and Tracker.UID read without decoding. A metav1.ObjectMeta
// took 232 bytes for it, mostly empty fields; this takes 88. The other
// fields are not kept: as metav1.Object allows for fields an object does
// not support, reading one gives its zero value and setting it does
// nothing (reads that need them decode the object).
type keptMeta struct {
	name, namespace, uid, resourceVersion string
	owners                                []metav1.OwnerReference
}

var _ metav1.Object = &keptMeta{}

func (m *keptMeta) deepCopy() keptMeta {
	c := *m
	if m.owners != nil {
		c.owners = make([]metav1.OwnerReference, len(m.owners))
		for i := range m.owners {
			m.owners[i].DeepCopyInto(&c.owners[i])
		}
	}
	return c
}

func (m *keptMeta) GetNamespace() string                        { return m.namespace }
func (m *keptMeta) SetNamespace(namespace string)               { m.namespace = namespace }
func (m *keptMeta) GetName() string                             { return m.name }
func (m *keptMeta) SetName(name string)                         { m.name = name }
func (m *keptMeta) GetUID() types.UID                           { return types.UID(m.uid) }
func (m *keptMeta) SetUID(uid types.UID)                        { m.uid = string(uid) }
func (m *keptMeta) GetResourceVersion() string                  { return m.resourceVersion }
func (m *keptMeta) SetResourceVersion(version string)           { m.resourceVersion = version }
func (m *keptMeta) GetOwnerReferences() []metav1.OwnerReference { return m.owners }
func (m *keptMeta) SetOwnerReferences(r []metav1.OwnerReference) {
	m.owners = r
}

// Not kept.

func (m *keptMeta) GetGenerateName() string                                    { return "" }
func (m *keptMeta) SetGenerateName(string)                                     {}
func (m *keptMeta) GetGeneration() int64                                       { return 0 }
func (m *keptMeta) SetGeneration(int64)                                        {}
func (m *keptMeta) GetSelfLink() string                                        { return "" }
func (m *keptMeta) SetSelfLink(string)                                         {}
func (m *keptMeta) GetCreationTimestamp() metav1.Time                          { return metav1.Time{} }
func (m *keptMeta) SetCreationTimestamp(metav1.Time)                           {}
func (m *keptMeta) GetDeletionTimestamp() *metav1.Time                         { return nil }
func (m *keptMeta) SetDeletionTimestamp(*metav1.Time)                          {}
func (m *keptMeta) GetDeletionGracePeriodSeconds() *int64                      { return nil }
func (m *keptMeta) SetDeletionGracePeriodSeconds(*int64)                       {}
func (m *keptMeta) GetLabels() map[string]string                               { return nil }
func (m *keptMeta) SetLabels(map[string]string)                                {}
func (m *keptMeta) GetAnnotations() map[string]string                          { return nil }
func (m *keptMeta) SetAnnotations(map[string]string)                           {}
func (m *keptMeta) GetFinalizers() []string                                    { return nil }
func (m *keptMeta) SetFinalizers([]string)                                     {}
func (m *keptMeta) GetManagedFields() []metav1.ManagedFieldsEntry              { return nil }
func (m *keptMeta) SetManagedFields(managedFields []metav1.ManagedFieldsEntry) {}
