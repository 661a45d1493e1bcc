package rollout

import (
	"encoding/json"
	"fmt"
)

// Annotations on a chain that steer its roll-out (`kontinue rollout`).
const (
	// AnnotationPaused ("true") stops the waves where they are.
	AnnotationPaused = "kontinue.dev/rollout-paused"
	// AnnotationResume: a new token goes on after a halt.
	AnnotationResume = "kontinue.dev/rollout-resume"
)

// Read decodes a chain's spec.rollout and status.rollout (obj: the chain
// as a map). No policy: nil, nil, nil. err says why the policy cannot be
// used (the chain reports it; its owners render with the live definitions).
func Read(obj map[string]any) (*Compiled, *Status, error) {
	spec, _ := obj["spec"].(map[string]any)
	raw, ok := spec["rollout"]
	if !ok || raw == nil {
		return nil, nil, nil
	}
	var p Policy
	if err := remarshal(raw, &p); err != nil {
		return nil, nil, fmt.Errorf("cannot read spec.rollout: %w", err)
	}
	c, err := Compile(&p)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.rollout: %w", err)
	}
	st := &Status{}
	if status, ok := obj["status"].(map[string]any); ok && status["rollout"] != nil {
		// A status that cannot be read is as none: the live definitions
		// are adopted again.
		_ = remarshal(status["rollout"], st)
	}
	return c, st, nil
}

func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
