package main

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-tools/pkg/crd"
	"sigs.k8s.io/controller-tools/pkg/loader"
)

const metav1Path = "k8s.io/apimachinery/pkg/apis/meta/v1"

// addKnownTypes gives metav1.Condition the schema Kontinue has always served
// (and Cartographer's own conditions obey): only type and status required,
// no patterns or lengths. Upstream's markers would require reason, message
// and lastTransitionTime and a reason matching ^[A-Za-z]..., which a
// condition Kontinue writes need not meet (e.g. the <Type>Condition reason
// of a health rule names a user's condition type, which may hold a dash):
// the status write would be refused and the owner would stop reporting.
func addKnownTypes() {
	upstream := crd.KnownPackages[metav1Path]
	crd.KnownPackages[metav1Path] = func(p *crd.Parser, pkg *loader.Package) {
		upstream(p, pkg)
		p.Schemata[crd.TypeIdent{Name: "Condition", Package: pkg}] = condition
	}
}

func str(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
}

var condition = apiextensionsv1.JSONSchemaProps{
	Description: "One condition (the standard Kubernetes condition shape).",
	Type:        "object",
	Required:    []string{"status", "type"},
	Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"type": str("Type of the condition, e.g. Ready."),
		"status": {
			Type: "string", Description: "Status of the condition.",
			Enum: []apiextensionsv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}},
		},
		"reason":  str("One CamelCase word saying why the condition has its status, e.g. TemplatesNotFound. Tools switch on it."),
		"message": str("Explanation for a person: names the step, template, chain or path involved so that you can act on it."),
		"lastTransitionTime": {
			Type: "string", Format: "date-time", Description: "When status last changed.",
		},
		"observedGeneration": {
			Type: "integer", Format: "int64", Minimum: new(float64(0)),
			Description: "metadata.generation of the object when the condition was computed.",
		},
	},
}
