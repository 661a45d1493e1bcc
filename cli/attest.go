package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/version"
)

type attestOptions struct {
	step     string
	output   string
	verify   bool
	key      string
	signWith string
}

func attestCommand(a *app) *cobra.Command {
	o := &attestOptions{}
	c := &cobra.Command{
		Use:   "attest KIND NAME",
		Short: "an in-toto SLSA provenance statement of a step's outputs, and the controller's signed one",
		Long: `Print the in-toto Statement (predicate SLSA provenance v1) of a Workload's or
Deliverable's step: its subjects are what the step produced with its current
input set (its outputs, and the object it applied by its applied digest),
its resolved dependencies the input values that produced them (commits,
images and configs by digest), as the owner's status records them
(status.resources[].provenance). The statement is built from the status you
read, unsigned (docs/attestation.md).

A controller started with --attestation-key signs each step's statement as
its input set succeeds, and keeps it in the owner's history ConfigMap
(kontinue-history.<kind>.<name>, key attestation.<step>.intoto.jsonl), with
the statements of the step's last few input sets before it, one per line.
-o envelope prints the newest as stored; --verify --key checks a stored
envelope's signature with the public key and that it states what the status
records now (same owner, step, input set, subjects and dependencies), and
exits 1 when none does.

--sign-with signs the statement built here with your own key: it vouches for
what you read in the status, not for what the controller observed.`,
		Example: `  # What made the image of a workload's build step.
  kontinue attest workload app -n dev --step image-builder

  # The statement as JSON; the controller's signed envelope, for other tools.
  kontinue attest workload app -n dev --step image-builder -o json
  kontinue attest workload app -n dev --step image-builder -o envelope > build.intoto.jsonl

  # Check the controller's signature and that it matches the status.
  kontinue attest workload app -n dev --step image-builder --verify --key attest.pub`,
		Args: exactArgs(2, "a kind and a name"),
		RunE: func(c *cobra.Command, args []string) error { return a.runAttest(c.Context(), o, args) },
	}
	fs := c.Flags()
	fs.StringVar(&o.step, "step", "", "the step (default: the owner's one step no later step reads)")
	fs.StringVarP(&o.output, "output", "o", "", "text (the default), json (the statement), or envelope (the signed envelope the controller stored)")
	fs.BoolVar(&o.verify, "verify", false, "verify the controller's signed envelope with --key and compare it with the status")
	fs.StringVar(&o.key, "key", "", "PEM public key (ECDSA P-256 or ed25519) that --verify checks the signature with")
	fs.StringVar(&o.signWith, "sign-with", "", "PEM private key: print the statement built here signed in a DSSE envelope")
	return c
}

func (a *app) runAttest(ctx context.Context, o *attestOptions, args []string) error {
	switch o.output {
	case "", "text", "json", "envelope":
	default:
		return usagef("-o must be text, json or envelope")
	}
	switch {
	case o.verify && o.key == "":
		return usagef("--verify needs --key, the public key to check the signature with")
	case !o.verify && o.key != "":
		return usagef("--key is for --verify; to sign, --sign-with")
	case o.signWith != "" && (o.verify || o.output == "envelope"):
		return usagef("--sign-with prints a new envelope: not with --verify or -o envelope")
	}
	// Keys first: a bad one is said before anything is read.
	var key *attest.Key
	var err error
	if o.key != "" {
		key, err = attest.LoadKeyFile(o.key, false)
	} else if o.signWith != "" {
		key, err = attest.LoadKeyFile(o.signWith, true)
	}
	if err != nil {
		return err
	}
	k, err := parseOwnerKind(args[0])
	if err != nil {
		return err
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns, name := loaded.Namespace, args[1]
	obj, err := getOwner(ctx, dyn, k, ns, name)
	if err != nil {
		return err
	}
	owner, err := view.DecodeTraceOwner(obj)
	if err != nil {
		return fmt.Errorf("%s %s/%s: unreadable status: %w", k.kind, ns, name, err)
	}
	step := o.step
	if step == "" {
		leaves := owner.Leaves()
		if len(leaves) != 1 {
			return usagef("%s %s/%s has %d steps no later step reads (%s): choose one with --step", k.kind, ns, name, len(leaves), strings.Join(leaves, ", "))
		}
		step = leaves[0]
	}
	if o.output == "envelope" || o.verify {
		envs, err := storedEnvelopes(ctx, dyn, k.kind, ns, name, step)
		if err != nil {
			return err
		}
		if o.output == "envelope" {
			_, err := fmt.Fprintln(a.env.Stdout, envs[len(envs)-1])
			return err
		}
		return a.verifyAttestation(ctx, o, key, obj, owner, step, envs)
	}
	stmt, err := attest.Build(attestInput(obj, owner, step))
	if err != nil {
		return err
	}
	if o.signWith != "" {
		env, err := attest.Sign(ctx, key, stmt)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.env.Stdout, "%s\n", env)
		return err
	}
	return writeStatement(a.env.Stdout, o.output, stmt)
}

func attestInput(obj *unstructured.Unstructured, owner view.TraceOwner, step string) attest.Input {
	return attest.Input{Owner: attest.Owner{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
		Name: obj.GetName(), UID: string(obj.GetUID())}, Status: owner.Status, Step: step, Upstream: attest.UpstreamOf(obj),
		Version: version.Version}
}

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// storedEnvelopes are the controller's signed envelopes of step, oldest
// first, read from the owner's history ConfigMap with the caller's identity.
func storedEnvelopes(ctx context.Context, dyn dynamic.Interface, kind, ns, name, step string) ([]string, error) {
	cmName := history.Name(kind, name)
	cm, err := dyn.Resource(configMapsGVR).Namespace(ns).Get(ctx, cmName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("no signed attestation of %s %s/%s: its history ConfigMap %s does not exist (the controller signs with --attestation-key, once a step's input set succeeds)", kind, ns, name, cmName)
	case err != nil:
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", ns, cmName, err)
	}
	stored, _, _ := unstructured.NestedString(cm.Object, "data", attest.DataKey(step))
	envs := attest.Envelopes(stored)
	if len(envs) == 0 {
		return nil, fmt.Errorf("no signed attestation of %s %s/%s step [%s] in ConfigMap %s (key %s): the controller signs with --attestation-key, once the step's input set succeeds",
			kind, ns, name, step, cmName, attest.DataKey(step))
	}
	return envs, nil
}

// verifyAttestation checks the envelopes' signatures with key, then that
// one states what the status records now: the newest first (the current
// set's, unless the controller has not written it yet); when none does,
// why the newest does not.
func (a *app) verifyAttestation(ctx context.Context, o *attestOptions, key *attest.Key, obj *unstructured.Unstructured, owner view.TraceOwner, step string, envs []string) error {
	var signed *intoto.Statement
	var first error
	for i := len(envs) - 1; i >= 0 && signed == nil; i-- {
		var err error
		if signed, err = matchesStatus(ctx, o, key, obj, owner, step, envs[i]); err != nil && first == nil {
			first = err
		}
	}
	if signed == nil {
		return first
	}
	if o.output == "json" {
		return writeStatement(a.env.Stdout, "json", signed)
	}
	fmt.Fprintf(a.env.Stdout, "Verified: signed with key %s, and it states what the status records now.\n", key.ID)
	return writeStatement(a.env.Stdout, "text", signed)
}

// matchesStatus checks env's signature with key, then that it states what
// the status records now.
func matchesStatus(ctx context.Context, o *attestOptions, key *attest.Key, obj *unstructured.Unstructured, owner view.TraceOwner, step, env string) (*intoto.Statement, error) {
	signed, err := attest.Verify(ctx, key, []byte(env))
	if err != nil {
		return nil, fmt.Errorf("step [%s]: the stored envelope does not verify with %s: %w", step, o.key, err)
	}
	now, err := attest.Build(attestInput(obj, owner, step))
	if err != nil {
		return nil, fmt.Errorf("step [%s]: the signature is good, but the status has nothing to compare it with: %w", step, err)
	}
	if err := attest.Compare(signed, now); err != nil {
		return nil, fmt.Errorf("step [%s]: the signature is good, but %w", step, err)
	}
	return signed, nil
}

// writeStatement prints s as indented JSON, or in a few lines for people.
func writeStatement(w io.Writer, output string, s *intoto.Statement) error {
	b, err := attest.Marshal(s)
	if err != nil {
		return err
	}
	if output == "json" {
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, out.String())
		return err
	}
	j := gjson.ParseBytes(b)
	ext := j.Get("predicate.buildDefinition.externalParameters")
	fmt.Fprintf(w, "%s %s/%s step [%s], input set %s\n", ext.Get("owner.kind"), ext.Get("owner.namespace"), ext.Get("owner.name"),
		ext.Get("step"), j.Get("predicate.buildDefinition.internalParameters.inputDigest"))
	if c := ext.Get("chain"); c.Exists() {
		fmt.Fprintf(w, "  chain     %s %s", c.Get("kind"), c.Get("name"))
		if t := ext.Get("template"); t.Exists() {
			fmt.Fprintf(w, ", template %s %s", t.Get("kind"), t.Get("name"))
		}
		fmt.Fprintln(w)
	}
	meta := j.Get("predicate.runDetails.metadata")
	if meta.Get("startedOn").Exists() || meta.Get("finishedOn").Exists() {
		fmt.Fprintf(w, "  taken     %s, succeeded %s\n", orDash(meta.Get("startedOn").String()), orDash(meta.Get("finishedOn").String()))
	}
	fmt.Fprintln(w, "Subjects:")
	for _, s := range j.Get("subject").Array() {
		fmt.Fprintf(w, "  %-10s %s%s\n", s.Get("name"), digests(s), note(s.Get("annotations.value").String()))
	}
	fmt.Fprintln(w, "Made from:")
	deps := j.Get("predicate.buildDefinition.resolvedDependencies").Array()
	if len(deps) == 0 {
		fmt.Fprintln(w, "  the owner's spec (a first step), at generation "+orDash(ext.Get("owner.generation").String()))
	}
	for _, d := range deps {
		what := d.Get("uri").String()
		if r := d.Get("annotations.revision").String(); r != "" {
			what += " @ " + r
		}
		fmt.Fprintf(w, "  %-10s %s from [%s] %s%s\n", d.Get("name"), d.Get("annotations.input"), d.Get("annotations.step"), digests(d), note(what))
	}
	fmt.Fprintf(w, "Builder: %s (kontinue %s)\n", j.Get("predicate.runDetails.builder.id"), j.Get("predicate.runDetails.builder.version.kontinue"))
	return nil
}

func digests(d gjson.Result) string {
	var out []string
	d.Get("digest").ForEach(func(k, v gjson.Result) bool {
		out = append(out, k.String()+":"+v.String())
		return true
	})
	if len(out) == 0 {
		return "(no digest)"
	}
	return strings.Join(out, " ")
}

func note(s string) string {
	if s == "" {
		return ""
	}
	return "  " + s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
