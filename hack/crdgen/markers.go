package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdmarkers "sigs.k8s.io/controller-tools/pkg/crd/markers"
	"sigs.k8s.io/controller-tools/pkg/markers"
)

// Kontinue's markers, for what controller-gen's cannot say:
//
//	+kontinue:validation:OneOf=`<JSON schema>`   (type) one more oneOf branch
//	+kontinue:validation:AnyOf=`<JSON schema>`   (type) one more anyOf branch
//
// CEL cannot see a field that holds any JSON value (it has no type), so
// "exactly one of value and default" and "values only with In and NotIn"
// are JSON schema junctors, holding only constraints.
//
//	+kontinue:schema=`<JSON schema>`             (field, with Schemaless)
//
// The whole schema of a field that no Go type describes (a list of any JSON
// values); its description stays the field's doc comment.
//
//	+kontinue:variant:path=<path>,omit=true          drop a property
//	+kontinue:variant:path=<path>,required=true      make a property required
//	+kontinue:variant:path=<path>,enum=A;B           replace an enum
//	+kontinue:variant:path=<path>,dropRule=<prefix>  drop the CEL rules there
//	                                                 whose message starts so
//	+kontinue:variant:path=<path>,rule=...,message=...[,messageExpression=...]
//
// On a kind's root type: how that kind narrows a type it shares with other
// kinds (the five template kinds share one TemplateSpec, the two chains one
// ChainSpec), applied to the kind's finished schema in the order written.
// A path is dotted from the root (spec.resources[].templateRef.kind), []
// stepping into a list's items.

// JSONSchema is a marker argument holding a JSON schema.
type JSONSchema string

func (s JSONSchema) parse() (apiextensionsv1.JSONSchemaProps, error) {
	var props apiextensionsv1.JSONSchemaProps
	dec := json.NewDecoder(strings.NewReader(string(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&props); err != nil {
		return props, fmt.Errorf("not a JSON schema: %w: %s", err, s)
	}
	return props, nil
}

// OneOf adds a oneOf branch.
type OneOf JSONSchema

func (m OneOf) ApplyToSchema(_ *crdmarkers.SchemaContext, schema *apiextensionsv1.JSONSchemaProps) error {
	p, err := JSONSchema(m).parse()
	if err != nil {
		return err
	}
	schema.OneOf = append(schema.OneOf, p)
	return nil
}

// AnyOf adds an anyOf branch.
type AnyOf JSONSchema

func (m AnyOf) ApplyToSchema(_ *crdmarkers.SchemaContext, schema *apiextensionsv1.JSONSchemaProps) error {
	p, err := JSONSchema(m).parse()
	if err != nil {
		return err
	}
	schema.AnyOf = append(schema.AnyOf, p)
	return nil
}

// Schema sets a field's whole schema, keeping its description.
type Schema JSONSchema

func (m Schema) ApplyToSchema(_ *crdmarkers.SchemaContext, schema *apiextensionsv1.JSONSchemaProps) error {
	p, err := JSONSchema(m).parse()
	if err != nil {
		return err
	}
	p.Description = schema.Description
	*schema = p
	return nil
}

// ApplyPriority puts Schema before the markers that add to it (+nullable).
func (Schema) ApplyPriority() crdmarkers.ApplyPriority { return crdmarkers.ApplyPriorityFirst }

// Variant is one narrowing of a kind's schema.
type Variant struct {
	Path              string
	Omit              bool     `marker:",optional"`
	Required          bool     `marker:",optional"`
	Enum              []string `marker:",optional"`
	DropRule          string   `marker:"dropRule,optional"`
	Rule              string   `marker:",optional"`
	Message           string   `marker:",optional"`
	MessageExpression string   `marker:"messageExpression,optional"`
}

func (v Variant) ApplyToCRD(spec *apiextensionsv1.CustomResourceDefinitionSpec, _ string) error {
	for i := range spec.Versions {
		if spec.Versions[i].Schema == nil || spec.Versions[i].Schema.OpenAPIV3Schema == nil {
			continue
		}
		if err := v.apply(spec.Versions[i].Schema.OpenAPIV3Schema); err != nil {
			return fmt.Errorf("+kontinue:variant:path=%s: %w", v.Path, err)
		}
	}
	return nil
}

func (v Variant) apply(root *apiextensionsv1.JSONSchemaProps) error {
	steps := strings.Split(v.Path, ".")
	return edit(root, steps[:len(steps)-1], func(parent *apiextensionsv1.JSONSchemaProps) error {
		return v.applyAt(parent, steps[len(steps)-1])
	})
}

// applyAt applies v to the property last ("name" or "name[]": its items) of parent.
func (v Variant) applyAt(parent *apiextensionsv1.JSONSchemaProps, last string) error {
	items := strings.HasSuffix(last, "[]")
	name := strings.TrimSuffix(last, "[]")
	prop, ok := parent.Properties[name]
	if !ok {
		return fmt.Errorf("no property %s", name)
	}
	switch {
	case v.Omit, v.Required:
		if items {
			return fmt.Errorf("omit and required take a property, not its items")
		}
		if v.Omit {
			delete(parent.Properties, name)
			parent.Required = slices.DeleteFunc(parent.Required, func(r string) bool { return r == name })
		} else if !slices.Contains(parent.Required, name) {
			parent.Required = append(parent.Required, name)
			slices.Sort(parent.Required)
		}
		return nil
	}
	target := &prop
	if items {
		if prop.Items == nil || prop.Items.Schema == nil {
			return fmt.Errorf("%s is not a list", name)
		}
		target = prop.Items.Schema
	}
	switch {
	case len(v.Enum) > 0:
		target.Enum = nil
		for _, e := range v.Enum {
			b, _ := json.Marshal(e)
			target.Enum = append(target.Enum, apiextensionsv1.JSON{Raw: b})
		}
	case v.DropRule != "":
		// By message, not all of them: a rule of the shared type that
		// the variant does not name (the render engines' one) stays, and
		// a change to it is written once.
		kept := slices.DeleteFunc(slices.Clone(target.XValidations), func(r apiextensionsv1.ValidationRule) bool {
			return strings.HasPrefix(r.Message, v.DropRule)
		})
		if len(kept) == len(target.XValidations) {
			return fmt.Errorf("no rule's message starts with %q", v.DropRule)
		}
		target.XValidations = kept
	case v.Rule != "":
		if v.Message == "" {
			return fmt.Errorf("rule %q has no message", v.Rule)
		}
		target.XValidations = append(target.XValidations, apiextensionsv1.ValidationRule{
			Rule: v.Rule, Message: v.Message, MessageExpression: v.MessageExpression,
		})
	default:
		return fmt.Errorf("says nothing to do")
	}
	parent.Properties[name] = prop
	return nil
}

// edit follows steps (property names; a [] suffix steps into the items) and
// calls fn with the schema they end at. Properties holds values, so each
// level is edited as a copy and stored back.
func edit(s *apiextensionsv1.JSONSchemaProps, steps []string, fn func(*apiextensionsv1.JSONSchemaProps) error) error {
	if len(steps) == 0 {
		return fn(s)
	}
	name := strings.TrimSuffix(steps[0], "[]")
	prop, ok := s.Properties[name]
	if !ok {
		return fmt.Errorf("no property %s", name)
	}
	next := &prop
	if strings.HasSuffix(steps[0], "[]") {
		if prop.Items == nil || prop.Items.Schema == nil {
			return fmt.Errorf("%s is not a list", name)
		}
		next = prop.Items.Schema
	}
	if err := edit(next, steps[1:], fn); err != nil {
		return err
	}
	s.Properties[name] = prop
	return nil
}

func registerMarkers(into *markers.Registry) error {
	for _, def := range []*markers.Definition{
		markers.Must(markers.MakeDefinition("kontinue:validation:OneOf", markers.DescribesType, OneOf(""))),
		markers.Must(markers.MakeDefinition("kontinue:validation:AnyOf", markers.DescribesType, AnyOf(""))),
		markers.Must(markers.MakeDefinition("kontinue:schema", markers.DescribesField, Schema(""))),
		markers.Must(markers.MakeDefinition("kontinue:variant", markers.DescribesType, Variant{})),
	} {
		if err := into.Register(def); err != nil {
			return err
		}
	}
	return nil
}
