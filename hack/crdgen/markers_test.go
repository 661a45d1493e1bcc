package main

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func schema(t *testing.T, s string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var p apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func asJSON(t *testing.T, p *apiextensionsv1.JSONSchemaProps) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const kind = `{"type":"object","properties":{"spec":{"type":"object","required":["a","b"],
  "x-kubernetes-validations":[{"rule":"true","message":"m"},{"rule":"1 == 1","message":"one is one"},{"rule":"2 == 2","message":"one more"}],
  "properties":{"a":{"type":"string"},"b":{"type":"string"},
    "steps":{"type":"array","items":{"type":"object","properties":{"kind":{"type":"string","enum":["X","Y","Z"]}}}}}}}}`

func TestVariant(t *testing.T) {
	tests := []struct {
		name string
		v    Variant
		want string // the spec after the variant
		err  string
	}{
		{"omit drops the property and its required entry", Variant{Path: "spec.a", Omit: true},
			`"required":["b"],"properties":{"b":`, ""},
		{"required", Variant{Path: "spec.steps", Required: true}, `"required":["a","b","steps"]`, ""},
		{"enum in items", Variant{Path: "spec.steps[].kind", Enum: []string{"X", "Y"}}, `"enum":["X","Y"]`, ""},
		{"rule on items", Variant{Path: "spec.steps[]", Rule: "self.kind != 'Z'", Message: "no Z", MessageExpression: "'no Z'"},
			`"items":{"type":"object","properties":{"kind":{"type":"string","enum":["X","Y","Z"]}},"x-kubernetes-validations":[{"rule":"self.kind != 'Z'","message":"no Z","messageExpression":"'no Z'"}]}`, ""},
		{"dropRule drops the rules whose message starts so", Variant{Path: "spec", DropRule: "one "},
			`"x-kubernetes-validations":[{"rule":"true","message":"m"}]`, ""},
		{"dropRule of no rule", Variant{Path: "spec", DropRule: "two"}, "", `no rule's message starts with "two"`},
		{"a missing property", Variant{Path: "spec.c", Omit: true}, "", "no property c"},
		{"a missing step on the way", Variant{Path: "spec.c.d", Omit: true}, "", "no property c"},
		{"items of a non-list", Variant{Path: "spec.a[].x", Omit: true}, "", "a is not a list"},
		{"omit of items", Variant{Path: "spec.steps[]", Omit: true}, "", "not its items"},
		{"a rule without message", Variant{Path: "spec", Rule: "true"}, "", "has no message"},
		{"nothing to do", Variant{Path: "spec.a"}, "", "nothing to do"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := schema(t, kind)
			err := tt.v.apply(root)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := root.Properties["spec"]
			got := asJSON(t, &spec)
			if w, ok := strings.CutPrefix(tt.want, "NOT:"); ok {
				if strings.Contains(got, w) {
					t.Fatalf("%s still has %s", got, w)
				}
				return
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("got %s\nwant it to contain %s", got, tt.want)
			}
		})
	}
}

func TestJSONSchemaMarkers(t *testing.T) {
	s := &apiextensionsv1.JSONSchemaProps{Description: "d", Type: "object"}
	if err := (OneOf(`{"required":["value"]}`)).ApplyToSchema(nil, s); err != nil {
		t.Fatal(err)
	}
	if err := (AnyOf(`{"required":["x"]}`)).ApplyToSchema(nil, s); err != nil {
		t.Fatal(err)
	}
	if len(s.OneOf) != 1 || len(s.AnyOf) != 1 || s.OneOf[0].Required[0] != "value" {
		t.Fatalf("got %s", asJSON(t, s))
	}
	f := &apiextensionsv1.JSONSchemaProps{Description: "the field"}
	if err := (Schema(`{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}}`)).ApplyToSchema(nil, f); err != nil {
		t.Fatal(err)
	}
	if f.Type != "array" || f.Description != "the field" || f.Items == nil {
		t.Fatalf("got %s", asJSON(t, f))
	}
	// A typo in a marker's schema is an error, not a field silently dropped.
	if err := (OneOf(`{"requierd":["value"]}`)).ApplyToSchema(nil, s); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}
