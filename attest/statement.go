// Package attest turns what Kontinue recorded about a step (its status:
// outputs, stamped object, provenance) into an in-toto Statement with a
// SLSA provenance v1 predicate, and signs and verifies it in a DSSE
// envelope (docs/attestation.md).
//
// Build is pure: it reads the owner's status as the API server returned it
// and nothing else, so the controller (which signs what it observed) and
// the CLI (which prints it for anyone who may read the owner) make the same
// statement from the same status.
package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	st "kontinue.dev/kontinue/reconciler/status"
)

// The statement's types and the identity of what built it.
const (
	PredicateType = "https://slsa.dev/provenance/v1"
	// BuildType names the schema of externalParameters and
	// internalParameters below (docs/attestation.md).
	BuildType = "https://kontinue.dev/attestation/step/v1"
	// BuilderID is Kontinue's controller: it applied the step's object,
	// watched it and recorded the provenance the statement is made of.
	BuilderID = "https://kontinue.dev/controller"
	// DigestInputSet is the digest algorithm of a stamped object: the
	// input set it was written for, as its kontinue.dev/input-set
	// annotation names it (the applied digest of the set's first render, a
	// truncated SHA-256 of the object Kontinue rendered; an object written
	// before objects named their set has it as its
	// kontinue.dev/applied-digest), not a hash a tool can recompute from
	// the live object.
	DigestInputSet = "kontinue.dev/input-set"
)

// Owner is the Workload or Deliverable whose step is attested.
type Owner struct {
	APIVersion, Kind, Namespace, Name, UID string
}

// Upstream is the Workload step that stamped a Deliverable, as the
// Deliverable's own metadata says (its controller reference, its
// carto.run labels and its applied digest): the link from a delivery back
// to the supply chain that wrote it.
type Upstream struct {
	Kind, Namespace, Name, UID string
	Step                       string
	// Digest is the input set the Deliverable was written for (its
	// kontinue.dev/input-set, else its kontinue.dev/applied-digest): the
	// subject digest of the Workload step's own attestation.
	Digest string
}

// Input is everything a statement is made of.
type Input struct {
	Owner    Owner
	Status   st.OwnerStatus
	Step     string
	Upstream *Upstream
	// Version is the version of Kontinue that builds the statement.
	Version string
}

// ErrNotAttestable: the step has nothing a statement could say yet (no
// success recorded, no outputs and no object).
var ErrNotAttestable = errors.New("nothing to attest")

// Build makes the statement of in.Step's current input set: subjects are
// the step's outputs and the object it applied, resolved dependencies the
// input values that produced them.
func Build(in Input) (*intoto.Statement, error) {
	r := findStep(in.Status.Resources, in.Step)
	if r == nil {
		return nil, fmt.Errorf("%s %s/%s has no step [%s] in its status", in.Owner.Kind, in.Owner.Namespace, in.Owner.Name, in.Step)
	}
	var cur *st.InputSet
	if r.Provenance != nil {
		cur = r.Provenance.Current
	}
	if cur == nil || cur.Outcome != st.OutcomeSucceeded {
		return nil, fmt.Errorf("step [%s] has no input set that succeeded recorded in its provenance: %w", in.Step, ErrNotAttestable)
	}
	subjects := Subjects(r)
	if len(subjects) == 0 {
		return nil, fmt.Errorf("step [%s] has no outputs and no stamped object: %w", in.Step, ErrNotAttestable)
	}
	ext, err := structpb.NewStruct(externalParameters(in, r, cur))
	if err != nil {
		return nil, err
	}
	internal, err := structpb.NewStruct(map[string]any{"inputDigest": cur.Digest})
	if err != nil {
		return nil, err
	}
	deps, err := Dependencies(cur, in.Upstream)
	if err != nil {
		return nil, err
	}
	meta := &slsa.BuildMetadata{InvocationId: in.Owner.UID + "/" + in.Step + "/" + cur.Digest}
	if cur.TakenAt != nil {
		meta.StartedOn = timestamppb.New(cur.TakenAt.Time)
	}
	if cur.EndedAt != nil {
		meta.FinishedOn = timestamppb.New(cur.EndedAt.Time)
	}
	version := in.Version
	if version == "" {
		version = "dev"
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{BuildType: BuildType, ExternalParameters: ext,
			InternalParameters: internal, ResolvedDependencies: deps},
		RunDetails: &slsa.RunDetails{Builder: &slsa.Builder{Id: BuilderID, Version: map[string]string{"kontinue": version}},
			Metadata: meta},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance predicate: %w", err)
	}
	ps, err := toStruct(pred)
	if err != nil {
		return nil, err
	}
	s := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subjects, PredicateType: PredicateType, Predicate: ps}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	return s, nil
}

// externalParameters say which owner, chain, step and template the
// outputs came from: what a person asked for.
func externalParameters(in Input, r *st.Resource, cur *st.InputSet) map[string]any {
	owner := map[string]any{"apiVersion": in.Owner.APIVersion, "kind": in.Owner.Kind,
		"namespace": in.Owner.Namespace, "name": in.Owner.Name}
	if in.Owner.UID != "" {
		owner["uid"] = in.Owner.UID
	}
	if cur.OwnerGeneration > 0 {
		owner["generation"] = float64(cur.OwnerGeneration)
	}
	out := map[string]any{"owner": owner, "step": r.Name}
	chain := in.Status.SupplyChainRef
	if chain == nil {
		chain = in.Status.DeliveryRef
	}
	if chain != nil {
		c := map[string]any{"kind": chain.Kind, "name": chain.Name}
		if in.Status.ChainRevision != "" {
			c["revision"] = in.Status.ChainRevision
		}
		out["chain"] = c
	}
	if t := r.TemplateRef; t != nil {
		out["template"] = map[string]any{"kind": t.Kind, "name": t.Name}
	}
	return out
}

// toStruct is a message as a structpb.Struct: the Statement's predicate
// is any JSON object.
// OwnerOf reads back whom a statement Build made is about: the owner its
// externalParameters name. A statement without one (not Kontinue's step
// schema) is an error. Only meaningful for a statement whose signature was
// verified.
func OwnerOf(s *intoto.Statement) (Owner, error) {
	var o Owner
	if s.GetPredicateType() != PredicateType {
		return o, fmt.Errorf("predicate type %q, not %q", s.GetPredicateType(), PredicateType)
	}
	b, err := protojson.Marshal(s.GetPredicate())
	if err != nil {
		return o, err
	}
	var p slsa.Provenance
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &p); err != nil {
		return o, fmt.Errorf("not SLSA provenance v1: %w", err)
	}
	if bt := p.GetBuildDefinition().GetBuildType(); bt != BuildType {
		return o, fmt.Errorf("build type %q, not %q", bt, BuildType)
	}
	owner, ok := p.GetBuildDefinition().GetExternalParameters().AsMap()["owner"].(map[string]any)
	if !ok {
		return o, errors.New("externalParameters name no owner")
	}
	str := func(k string) string { v, _ := owner[k].(string); return v }
	o = Owner{APIVersion: str("apiVersion"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name"), UID: str("uid")}
	if o.Kind == "" || o.Namespace == "" || o.Name == "" {
		return o, errors.New("externalParameters name an incomplete owner")
	}
	return o, nil
}

func toStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(b, s)
}

// Marshal is the statement as compact JSON. protojson varies its
// whitespace on purpose; compacted, the same statement is the same bytes
// (maps are written sorted), which golden tests and comparisons rely on.
func Marshal(s *intoto.Statement) ([]byte, error) {
	b, err := protojson.Marshal(s)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func findStep(rs []st.Resource, name string) *st.Resource {
	for i := range rs {
		if rs[i].Name == name {
			return &rs[i]
		}
	}
	return nil
}
