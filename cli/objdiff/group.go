package objdiff

import (
	"sort"
	"strings"
)

// Ref names an owner.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"-"`
}

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Object is how one stamped object would change.
type Object struct {
	Step       string `json:"step"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Op: OpChanged; OpAdded, the step would stamp an object it has not;
	// OpRemoved, the step would no longer stamp this one.
	Op      string   `json:"op"`
	Changes []Change `json:"changes,omitempty"`
	Diff    string   `json:"diff"` // unified, live → new
	// Note says what the diff leaves out (a runnable step's runs).
	Note string `json:"note,omitempty"`
}

// Failure is a step of an owner that cannot be previewed, and why.
type Failure struct {
	Step    string `json:"step"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Owner is what a change does to one owner's stamped objects.
type Owner struct {
	Ref
	Objects  []Object  `json:"objects,omitempty"`
	Failures []Failure `json:"failures,omitempty"`
	// Generated are names Kontinue derives from the owner with a hash (a
	// runnable step's ClusterRunTemplate): set aside as <generated> when
	// grouping, like the owner's own name.
	Generated []string `json:"-"`
}

// Group is owners whose objects change the same way, once their own
// names, namespace and UID are set aside.
type Group struct {
	// Summary says what changes, the owner's own name, namespace and UID
	// as <name>, <namespace>, <uid>: "step [config] ConfigMap: data.image:
	// reg/<name>:v1 → reg/<name>:v2".
	Summary string `json:"summary"`
	Owners  []Ref  `json:"owners"`
	// Objects are the first owner's changes, to show.
	Objects []Object `json:"objects,omitempty"`
}

// GroupOwners groups owners by identical changes, the largest group
// first (then by first owner), owners in the order given. Owners without
// any change form a group with the summary "no change"; failures do not
// group (an owner's changes in other steps still do).
func GroupOwners(owners []Owner) []Group {
	idx := map[string]int{}
	var groups []Group
	for _, o := range owners {
		if len(o.Objects) == 0 && len(o.Failures) > 0 {
			continue
		}
		k := key(o)
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, Group{Summary: summary(o.Objects, neutral(o)), Objects: o.Objects})
		}
		groups[i].Owners = append(groups[i].Owners, o.Ref)
	}
	sort.SliceStable(groups, func(i, j int) bool { return len(groups[i].Owners) > len(groups[j].Owners) })
	return groups
}

// NoChange is the summary of owners whose objects stay as they are.
const NoChange = "no change"

func summary(objs []Object, r *strings.Replacer) string {
	if len(objs) == 0 {
		return NoChange
	}
	var parts []string
	for _, o := range objs {
		head := "step [" + o.Step + "] " + o.Kind
		switch o.Op {
		case OpAdded:
			parts = append(parts, head+": a new object")
		case OpRemoved:
			parts = append(parts, head+": no longer stamped")
		default:
			parts = append(parts, head+": "+Summary(o.Changes, r))
		}
	}
	return strings.Join(parts, "; ")
}

// key is an owner's changes with its own name, namespace and UID replaced
// by placeholders: owners whose templates put their name in a value
// (an image, a host) still group.
func key(o Owner) string {
	r := neutral(o)
	var b strings.Builder
	for _, obj := range o.Objects {
		b.WriteString(obj.Step + "|" + obj.APIVersion + "|" + obj.Kind + "|" + obj.Op + "|" + r.Replace(obj.Name) + "\n")
		for _, c := range obj.Changes {
			b.WriteString("  " + r.Replace(c.Path) + " " + c.Op + " " + r.Replace(sprint(c.Old)) + " " + r.Replace(sprint(c.New)) + "\n")
		}
	}
	return b.String()
}

// neutral replaces an owner's UID, namespace, name and generated names,
// the longest first (a name may hold the namespace or the other way round,
// a generated name both).
func neutral(o Owner) *strings.Replacer {
	r := o.Ref
	pairs := [][2]string{{r.UID, "<uid>"}, {r.Namespace, "<namespace>"}, {r.Name, "<name>"}}
	for _, g := range o.Generated {
		pairs = append(pairs, [2]string{g, "<generated>"})
	}
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i][0]) > len(pairs[j][0]) })
	var args []string
	for _, p := range pairs {
		if p[0] != "" {
			args = append(args, p[0], p[1])
		}
	}
	return strings.NewReplacer(args...)
}
