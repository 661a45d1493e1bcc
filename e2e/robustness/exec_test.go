package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// What each op does on the cluster. People act through impersonation
// (person-<tenant>, platform, rogue), so that the audit log names them.

const (
	mergePatch = "application/merge-patch+json"
	chainLabel = "robustness.kontinue.dev/chain"
)

func (r *run) exec(ctx context.Context, o Op) error {
	o = r.withRegistry(o)
	switch o.Do {
	case "create":
		return r.createOwner(ctx, o)
	case "param", "commit", "sa":
		return r.updateOwner(ctx, o)
	case "label", "annotate":
		field := "labels"
		if o.Do == "annotate" {
			field = "annotations"
		}
		v := o.Args["value"]
		if o.Args["key"] == chainLabel {
			v = r.prefix + "-" + v
		}
		var val any = v
		if v == "" {
			val = nil
		}
		return r.patch(ctx, o, objectPath(o.Kind, r.ns(o), o.Name), map[string]any{"metadata": map[string]any{field: map[string]any{o.Args["key"]: val}}})
	case "delete":
		_, err := r.actor(o).do(ctx, http.MethodDelete, objectPath(o.Kind, r.ns(o), o.Name), "", nil)
		return err
	case "squat":
		return r.squat(ctx, o)
	case "release":
		if o.Args["how"] == "delete" {
			_, err := r.actor(o).do(ctx, http.MethodDelete, objectPath(o.Kind, r.ns(o), o.Name), "", nil)
			return err
		}
		return r.patch(ctx, o, objectPath(o.Kind, r.ns(o), o.Name),
			map[string]any{"metadata": map[string]any{"annotations": map[string]any{"kontinue.dev/adopt-by": o.Args["adopt"]}}})
	case "handedit":
		field := "data"
		if o.Kind == "Widget" {
			field = "spec"
		}
		return r.patch(ctx, o, objectPath(o.Kind, r.ns(o), o.Name), map[string]any{field: map[string]any{"hand": o.Args["value"]}})
	case "grant":
		rb := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":%q},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},
"subjects":[{"kind":"ServiceAccount","name":%q,"namespace":%q}]}`,
			o.Args["sa"]+"-"+o.Args["role"], r.prefix+"-"+o.Args["role"], o.Args["sa"], r.ns(o))
		return r.actor(o).apply(ctx, objectPath("RoleBinding", r.ns(o), o.Args["sa"]+"-"+o.Args["role"]), []byte(rb), "person")
	case "revoke":
		_, err := r.actor(o).do(ctx, http.MethodDelete, objectPath("RoleBinding", r.ns(o), o.Args["sa"]+"-"+o.Args["role"]), "", nil)
		return err
	case "sadelete":
		_, err := r.actor(o).do(ctx, http.MethodDelete, objectPath("ServiceAccount", r.ns(o), o.Args["sa"]), "", nil)
		return err
	case "sacreate":
		_, err := r.actor(o).do(ctx, http.MethodPost, resourcePath("ServiceAccount", r.ns(o)), "application/json",
			[]byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":%q}}`, o.Args["sa"])))
		return err
	case "forge":
		return r.forge(ctx, o)
	case "pin":
		return r.pin(ctx, o)
	case "edit":
		ed, _ := strconv.Atoi(o.Args["edition"])
		return r.actor(o).applyYAML(ctx, render(catalogDocs[o.Name], r.prefix, ed, r.pauseOnFailure), "platform")
	case "policy":
		r.pauseOnFailure = o.Args["pauseOnFailure"] == "true"
		return r.actor(o).applyYAML(ctx, render(chainDocs["main"], r.prefix, 0, r.pauseOnFailure), "platform")
	case "pause", "resume":
		ann := map[string]any{"kontinue.dev/rollout-paused": "true"}
		if o.Do == "resume" {
			ann = map[string]any{"kontinue.dev/rollout-paused": nil, "kontinue.dev/rollout-resume": time.Now().Format(time.RFC3339Nano)}
		}
		return r.patch(ctx, o, objectPath("ClusterSupplyChain", "", r.prefix+"-"+o.Name), map[string]any{"metadata": map[string]any{"annotations": ann}})
	case "kill", "failover", "outage", "slow", "throttle":
		return r.fault(o)
	case "retag":
		return r.reg.retag(o.Tenant, o.Args["to"], o.Args["tag"])
	case "regdown", "reghang":
		r.reg.fail(o.Tenant, strings.TrimPrefix(o.Do, "reg"), msArg(o, "for"))
		r.background(func() {
			time.Sleep(msArg(o, "for"))
			r.mark(r.ns(o), "the registry answers again")
		})
		return nil
	}
	return fmt.Errorf("unknown op %q", o.Do)
}

// withRegistry fills in the run's registry for @REG@ in an op's args (an
// image of the verified chain's owners: registry_test.go).
func (r *run) withRegistry(o Op) Op {
	for _, v := range o.Args {
		if strings.Contains(v, "@REG@") {
			args := make(map[string]string, len(o.Args))
			for k, v := range o.Args {
				args[k] = strings.ReplaceAll(v, "@REG@", r.reg.base())
			}
			o.Args = args
			return o
		}
	}
	return o
}

// ns is the namespace of a tenant's op.
func (r *run) ns(o Op) string { return r.prefix + "-" + o.Tenant }

func (r *run) actor(o Op) api { return r.api.as(o.Actor) }

func (r *run) patch(ctx context.Context, o Op, path string, body map[string]any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = r.actor(o).do(ctx, http.MethodPatch, path, mergePatch, raw)
	return err
}

func (r *run) createOwner(ctx context.Context, o Op) error {
	var labels map[string]string
	if err := json.Unmarshal([]byte(o.Args["labels"]), &labels); err != nil {
		return err
	}
	for k, v := range labels {
		if v == "" {
			delete(labels, k)
		}
	}
	labels[chainLabel] = r.prefix + "-" + o.Args["chain"]
	lb, _ := json.Marshal(labels)
	body := fmt.Sprintf(`{"apiVersion":"carto.run/v1alpha1","kind":%q,"metadata":{"name":%q,"labels":%s},`+
		`"spec":{"serviceAccountName":%q,"source":{"git":{"url":%q,"ref":{"commit":%q}}},"params":%s}}`,
		o.Kind, o.Name, lb, o.Args["sa"], "https://git.example/"+o.Tenant+"/"+o.Name+".git", o.Args["commit"], o.Args["params"])
	_, err := r.actor(o).do(ctx, http.MethodPost, resourcePath(o.Kind, r.ns(o)), "application/json", []byte(body))
	return err
}

// updateOwner reads the owner, changes it and writes it back (again on a
// conflict). Numbers keep their text (json.Number): the read-modify-write
// itself must not be what alters 9007199254740993.
func (r *run) updateOwner(ctx context.Context, o Op) error {
	a := r.actor(o)
	path := objectPath(o.Kind, r.ns(o), o.Name)
	var err error
	for range 5 {
		var body []byte
		if body, err = a.do(ctx, http.MethodGet, path, "", nil); err != nil {
			return err
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		var m map[string]any
		if err = d.Decode(&m); err != nil {
			return err
		}
		spec, _ := m["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			m["spec"] = spec
		}
		var splice func([]byte) []byte
		switch o.Do {
		case "commit":
			spec["source"] = map[string]any{"git": map[string]any{"url": "https://git.example/" + o.Tenant + "/" + o.Name + ".git",
				"ref": map[string]any{"commit": o.Args["commit"]}}}
		case "sa":
			spec["serviceAccountName"] = o.Args["sa"]
		case "param":
			var v any
			switch {
			case o.Args["deep"] != "" && o.Args["as"] == "text":
				n, _ := strconv.Atoi(o.Args["deep"])
				v = strings.Repeat(`{"d":`, n) + "1" + strings.Repeat("}", n)
			case o.Args["deep"] != "":
				// Too deep for encoding/json: spliced in as text.
				n, _ := strconv.Atoi(o.Args["deep"])
				v = "@@DEEP@@"
				splice = func(b []byte) []byte {
					deep := strings.Repeat(`{"d":`, n) + "1" + strings.Repeat("}", n)
					return bytes.Replace(b, []byte(`"@@DEEP@@"`), []byte(deep), 1)
				}
			case o.Args["large"] != "":
				n, _ := strconv.Atoi(o.Args["large"])
				v = strings.Repeat("large-value ", n/12)
			default:
				v = json.RawMessage(o.Args["value"])
			}
			setParam(spec, o.Args["param"], v)
		}
		out, merr := json.Marshal(m)
		if merr != nil {
			return merr
		}
		if splice != nil {
			out = splice(out)
		}
		if _, err = a.do(ctx, http.MethodPut, path, "application/json", out); !isCode(err, http.StatusConflict) {
			return err
		}
	}
	return err
}

func setParam(spec map[string]any, name string, v any) {
	params, _ := spec["params"].([]any)
	for _, p := range params {
		if m, ok := p.(map[string]any); ok && m["name"] == name {
			m["value"] = v
			return
		}
	}
	spec["params"] = append(params, map[string]any{"name": name, "value": v})
}

// stepOfSuffix: the step that stamps an object named <owner>-<suffix>.
var stepOfSuffix = map[string]string{"src": "src", "cfg": "cfg", "w": "widget", "echo": "echo", "go": "go", "y": "yaml",
	"manifest": "dsrc", "notify": "notify", "x1": "src", "x2": "src", "x3": "src"}

// squat: a person's own object at a name a step stamps; with labels
// "kontinue", it carries the owner's labels as Kontinue would put them
// (but no controller reference).
func (r *run) squat(ctx context.Context, o Op) error {
	meta := map[string]any{"name": o.Name}
	if o.Args["labels"] == "kontinue" {
		kind, owner, _ := strings.Cut(o.Args["owner"], "/")
		nameLabel, nsLabel := "carto.run/workload-name", "carto.run/workload-namespace"
		if kind == "Deliverable" {
			nameLabel, nsLabel = "carto.run/deliverable-name", "carto.run/deliverable-namespace"
		}
		suffix := o.Name[strings.LastIndex(o.Name, "-")+1:]
		meta["labels"] = map[string]any{"kontinue.dev/stamped": "true", nameLabel: owner, nsLabel: r.ns(o),
			"carto.run/resource-name": stepOfSuffix[suffix]}
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]any{"owner": o.Actor}}
	if o.Kind == "Widget" {
		obj = map[string]any{"apiVersion": "robustness.kontinue.dev/v1", "kind": "Widget", "metadata": meta, "spec": map[string]any{"owner": o.Actor}}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = r.actor(o).do(ctx, http.MethodPost, resourcePath(o.Kind, r.ns(o)), "application/json", raw)
	return err
}

// forge: a rogue controller writes a Widget's status: stale (an older
// generation, ready), or ready or failed on the current generation.
func (r *run) forge(ctx context.Context, o Op) error {
	path := objectPath("Widget", r.ns(o), o.Name)
	body, err := r.api.do(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	gen := gjson.GetBytes(body, "metadata.generation").Int()
	st := map[string]any{"observedGeneration": gen, "ready": o.Args["how"] != "fail"}
	if o.Args["how"] == "stale" {
		st["observedGeneration"] = gen - 1
	}
	return r.patch(ctx, o, path+"/status", map[string]any{"status": st})
}
