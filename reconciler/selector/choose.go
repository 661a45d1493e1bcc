package selector

import (
	"errors"
	"fmt"
	"strings"

	"kontinue.dev/kontinue/reconciler/api"
)

// Candidate is one named selector (a chain, or a step option). Names are
// opaque (an option may be named "passThrough:<input>" by the caller). A nil
// Selector is empty.
type Candidate struct {
	Name     string
	Selector *Selector
}

// CandidateError is an evaluation error of one candidate's selector.
type CandidateError struct {
	Name string
	Err  error // usually an *EvalError
}

func (e *CandidateError) Error() string {
	return fmt.Sprintf("selector of %q: %v", e.Name, e.Err)
}

func (e *CandidateError) Unwrap() error { return e.Err }

// Best returns the names of the matching candidates with the highest
// specificity, in input order. An Empty selector matches nothing when
// emptyMatches is false (chains) and everything with specificity 0 when it is
// true (option fallbacks). The first evaluation error is returned as a
// *CandidateError.
func Best(o Owner, cands []Candidate, emptyMatches bool) ([]string, error) {
	best := -1
	var names []string
	for _, c := range cands {
		spec := 0
		if c.Selector.Empty() {
			if !emptyMatches {
				continue
			}
		} else {
			ok, err := c.Selector.Matches(o)
			if err != nil {
				return nil, &CandidateError{Name: c.Name, Err: err}
			}
			if !ok {
				continue
			}
			spec = c.Selector.Specificity()
		}
		switch {
		case spec > best:
			best = spec
			names = append(names[:0], c.Name)
		case spec == best:
			names = append(names, c.Name)
		}
	}
	return names, nil
}

// Reasons of the owner's SupplyChainReady / DeliveryReady condition.
const (
	ReasonWorkloadLabelsMissing      = "WorkloadLabelsMissing"
	ReasonDeliverableLabelsMissing   = "DeliverableLabelsMissing"
	ReasonSupplyChainNotFound        = "SupplyChainNotFound"
	ReasonDeliveryNotFound           = "DeliveryNotFound"
	ReasonMultipleSupplyChainMatches = "MultipleSupplyChainMatches"
	ReasonMultipleDeliveryMatches    = "MultipleDeliveryMatches"
)

// ChainChoice is the outcome of chain selection: Name with an empty Reason,
// or no Name and the condition's Reason and Message.
type ChainChoice struct {
	Name    string
	Reason  string
	Message string
	// Candidates are the equally specific chains when more than one
	// matched: the message (Cartographer's) does not name them.
	Candidates []string
}

// words are the ways the messages name an owner kind and its chain kind.
type words struct {
	owner, chainKind, chain string
	labelsMissing           string
	notFound, multiple      string
}

func wordsFor(ownerKind string) words {
	if ownerKind == api.KindDeliverable {
		return words{"deliverable", api.KindClusterDelivery, "delivery",
			ReasonDeliverableLabelsMissing, ReasonDeliveryNotFound, ReasonMultipleDeliveryMatches}
	}
	return words{"workload", api.KindClusterSupplyChain, "supply chain",
		ReasonWorkloadLabelsMissing, ReasonSupplyChainNotFound, ReasonMultipleSupplyChainMatches}
}

// ChooseChain picks the chain of an owner named name among chains (each
// Candidate is a chain's compiled selector). An owner without labels is never
// matched (as in Cartographer). A chain whose selector cannot be evaluated on
// this owner makes the choice fail with the NotFound reason and a message
// naming the chain and the key: picking another chain instead could silently
// run the owner through the wrong one.
func ChooseChain(o Owner, name string, chains []Candidate) ChainChoice {
	w := wordsFor(o.Kind)
	if len(o.Labels) == 0 {
		return ChainChoice{Reason: w.labelsMissing, Message: fmt.Sprintf(
			"%s has no labels to match to %s", w.owner, w.chain)}
	}
	names, err := Best(o, chains, false)
	if err != nil {
		chain := ""
		var ce *CandidateError
		if errors.As(err, &ce) {
			chain, err = ce.Name, ce.Err
		}
		return ChainChoice{Reason: w.notFound, Message: fmt.Sprintf(
			"cannot evaluate the selector of %s [%s] on %s [%s]: %v",
			w.chainKind, chain, w.owner, name, err)}
	}
	switch len(names) {
	case 0:
		return ChainChoice{Reason: w.notFound, Message: fmt.Sprintf(
			"no %s found where full selector is satisfied by labels: %v", w.chain, o.Labels)}
	case 1:
		return ChainChoice{Name: names[0]}
	default:
		return ChainChoice{Reason: w.multiple, Candidates: names, Message: fmt.Sprintf(
			"%s may only match a single %s's selector", w.owner, w.chain)}
	}
}

// chainWord is how messages name a chain kind: "supply chain" or "delivery".
func chainWord(chainKind string) string {
	switch chainKind {
	case api.KindClusterDelivery, "delivery", "Delivery":
		return "delivery"
	}
	return "supply chain"
}

// OptionsMatchError reports that not exactly one option of a step matched
// (step reason TemplateOptionsMatchError).
type OptionsMatchError struct {
	Step      string
	ChainKind string // as passed to ChooseOption
	Chain     string
	Matches   []string // the winning options, possibly none
}

func (e *OptionsMatchError) Error() string {
	return fmt.Sprintf("expected exactly 1 option to match, found [%d] matching options [%s] for resource [%s] in %s [%s]",
		len(e.Matches), strings.Join(e.Matches, ", "), e.Step, chainWord(e.ChainKind), e.Chain)
}

// ResolveOptionsError reports that an option's selector could not be
// evaluated on the owner (step reason ResolveTemplateOptionsError).
type ResolveOptionsError struct {
	Step      string
	ChainKind string
	Chain     string
	Option    string
	Path      string // the field key as written, "" if unknown
	Err       error  // the cause, without the option and key
}

func (e *ResolveOptionsError) Error() string {
	key := ""
	if e.Path != "" {
		key = fmt.Sprintf(" at key [%s]", e.Path)
	}
	return fmt.Sprintf("error matching against template option [%s] for resource [%s] in %s [%s]%s: %v",
		e.Option, e.Step, chainWord(e.ChainKind), e.Chain, key, e.Err)
}

func (e *ResolveOptionsError) Unwrap() error { return e.Err }

// ChooseOption picks the template option of step in the chain: exactly one
// winner, else *OptionsMatchError; an evaluation error is a
// *ResolveOptionsError. chainKind is api.KindClusterSupplyChain or
// api.KindClusterDelivery.
func ChooseOption(o Owner, chainKind, chainName, step string, options []Candidate) (string, error) {
	names, err := Best(o, options, true)
	if err != nil {
		re := &ResolveOptionsError{Step: step, ChainKind: chainKind, Chain: chainName, Err: err}
		var ce *CandidateError
		if errors.As(err, &ce) {
			re.Option, re.Err = ce.Name, ce.Err
		}
		var ee *EvalError
		if errors.As(re.Err, &ee) {
			re.Path, re.Err = ee.Key, ee.Err
		}
		return "", re
	}
	if len(names) != 1 {
		return "", &OptionsMatchError{Step: step, ChainKind: chainKind, Chain: chainName, Matches: names}
	}
	return names[0], nil
}
