package cli

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/clientconfig"
	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

type checkOptions struct {
	controllerNamespace string
	leaseID             string
	chain               string
	serviceAccount      string
	color               string
}

// DefaultControllerNamespace and DefaultLeaseID are where deploy/ runs the
// controller and the name of its Lease.
const (
	DefaultControllerNamespace = "kontinue-system"
	DefaultLeaseID             = "kontinue-leader"
)

func checkCommand(a *app) *cobra.Command {
	o := &checkOptions{}
	c := &cobra.Command{
		Use:   "check",
		Short: "check the CRDs, the controller, and what a chain's service account may stamp",
		Long: `Check that Kontinue can work in this cluster:

  - the CRDs of carto.run/v1alpha1 are installed, established, served, and
    the same as this binary's;
  - a controller is running: its leader Lease is held and renewed (else
    the Deployment is looked at);
  - with shards: each shard's Lease (<leader-election-id>-shard-<name>, in
    the controller's namespace) is held and renewed, and no Workload,
    Deliverable or Runnable is labelled kontinue.dev/shard for a shard no
    live Lease serves, or with an empty label;
  - no chain's roll-out passes over owners that nothing moves (a shard no
    running replica serves, an owner being deleted, one no chain renders);
  - with --chain: what the service account that stamps for the chain may
    not do (create, patch, delete) to the kinds its templates stamp and the
    kinds its owners' steps stamped, asked with SubjectAccessReviews.

The exit status is 1 when something fails.`,
		Example: `  # CRDs and controller.
  kontinue check

  # And the rights of the account that stamps for a chain in namespace dev
  # (default: the chain's serviceAccountRef, else "default").
  kontinue check --chain source-to-url -n dev
  kontinue check --chain source-to-url --service-account dev/builder`,
		Args: NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return a.runCheck(c.Context(), o) },
	}
	fs := c.Flags()
	fs.StringVar(&o.controllerNamespace, "controller-namespace", "", "namespace of the controller's Lease and Deployment (default: the Lease found in any namespace you may list, else "+DefaultControllerNamespace+")")
	fs.StringVar(&o.leaseID, "leader-election-id", DefaultLeaseID, "name of the controller's Lease (its --leader-election-id)")
	fs.StringVar(&o.chain, "chain", "", "a ClusterSupplyChain or ClusterDelivery (NAME, or KIND/NAME) whose stamping rights to check in the namespace (-n)")
	fs.StringVar(&o.serviceAccount, "service-account", "", "NAMESPACE/NAME or NAME (in -n) of the account to check (default: the chain's serviceAccountRef, else default)")
	colorFlag(fs, &o.color)
	return c
}

// checker prints one `check` and remembers whether anything failed.
type checker struct {
	w      io.Writer
	color  bool
	failed int
}

func (c *checker) section(s string) { fmt.Fprintf(c.w, "► %s\n", s) }
func (c *checker) ok(format string, a ...any) {
	fmt.Fprintf(c.w, "%s %s\n", paint(c.color, cGreen, "✔"), fmt.Sprintf(format, a...))
}
func (c *checker) fail(format string, a ...any) {
	c.failed++
	fmt.Fprintf(c.w, "%s %s\n", paint(c.color, cRed, "✗"), fmt.Sprintf(format, a...))
}
func (c *checker) note(format string, a ...any) {
	fmt.Fprintf(c.w, "%s %s\n", paint(c.color, cYellow, "!"), fmt.Sprintf(format, a...))
}

func (a *app) runCheck(ctx context.Context, o *checkOptions) error {
	color, err := a.useColor(o.color)
	if err != nil {
		return err
	}
	if _, _, err := parseServiceAccount(o.serviceAccount, ""); err != nil {
		return err
	}
	if o.serviceAccount != "" && o.chain == "" {
		return usagef("--service-account needs --chain")
	}
	dyn, loaded, err := a.dynamicClient("kontinue-check")
	if err != nil {
		return err
	}
	c := &checker{w: a.env.Stdout, color: color}
	c.section("CustomResourceDefinitions")
	if err := checkCRDs(ctx, c, dyn); err != nil {
		return err
	}
	md, err := metadata.NewForConfig(loaded.Config)
	if err != nil {
		return err
	}
	c.section("controller")
	if ns, leases, listed := checkController(ctx, c, dyn, md, o, a.env.Now()); listed {
		checkShards(ctx, c, md, ns, o.leaseID, leases)
	}
	checkRollouts(ctx, c, dyn)
	if o.chain != "" {
		if err := checkChainRBAC(ctx, c, dyn, loaded, o); err != nil {
			return err
		}
	}
	if c.failed > 0 {
		return fmt.Errorf("%d check(s) failed", c.failed)
	}
	return nil
}

// ---- CRDs

// crdProblem says what is wrong with an installed CRD compared with the
// embedded one ("" when nothing is).
func crdProblem(installed, want *unstructured.Unstructured) string {
	if installed == nil {
		return "not installed"
	}
	if !crds.Established(installed) {
		return "not established"
	}
	served := false
	versions, _, _ := unstructured.NestedSlice(installed.Object, "spec", "versions")
	wantVersions, _, _ := unstructured.NestedSlice(want.Object, "spec", "versions")
	schemaOf := func(vs []any, name string) any {
		for _, v := range vs {
			m, _ := v.(map[string]any)
			if m["name"] == name {
				s, _, _ := unstructured.NestedFieldNoCopy(m, "schema", "openAPIV3Schema")
				return normalize(s)
			}
		}
		return nil
	}
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == api.Version && m["served"] == true {
			served = true
		}
	}
	if !served {
		return api.Version + " is not served"
	}
	if !reflect.DeepEqual(schemaOf(versions, api.Version), schemaOf(wantVersions, api.Version)) {
		return "its schema differs from this binary's (another version of Kontinue, or Cartographer's)"
	}
	return ""
}

// normalize makes JSON-equal values deep-equal (numbers as the API server
// holds them).
func normalize(v any) any {
	var out any
	if jsonvalue.Remarshal(v, &out) != nil {
		return v
	}
	return out
}

func checkCRDs(ctx context.Context, c *checker, dyn dynamic.Interface) error {
	want, err := crds.All()
	if err != nil {
		return err
	}
	l, err := dyn.Resource(crds.GVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		// A user who may not read CRDs: what discovery serves.
		return checkServed(ctx, c, dyn, want)
	}
	if err != nil {
		return err
	}
	installed := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		installed[l.Items[i].GetName()] = &l.Items[i]
	}
	bad := 0
	for _, w := range want {
		if p := crdProblem(installed[w.GetName()], w); p != "" {
			bad++
			c.fail("%s: %s", w.GetName(), p)
		}
	}
	if bad > 0 {
		c.note("install this binary's CRDs: kontinue crds | kubectl apply --server-side -f -")
		return nil
	}
	c.ok("%d CustomResourceDefinitions of %s/%s installed, established, served, and the same as this binary's", len(want), api.Group, api.Version)
	return nil
}

// checkServed checks, by listing each kind, that the API server serves it.
func checkServed(ctx context.Context, c *checker, dyn dynamic.Interface, want []*unstructured.Unstructured) error {
	c.note("you may not read CustomResourceDefinitions: checking that each kind is served")
	bad := 0
	for _, w := range want {
		plural, _, _ := unstructured.NestedString(w.Object, "spec", "names", "plural")
		gvr := schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: plural}
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsNotFound(err) {
			bad++
			c.fail("%s: not served", w.GetName())
		}
	}
	if bad == 0 {
		c.ok("%d kinds of %s/%s served", len(want), api.Group, api.Version)
	}
	return nil
}

// ---- controller

// leaseState says whether a Lease shows a running leader: its holder, and
// whether the last renewal is younger than the lease duration (plus a
// margin for clock skew).
func leaseState(lease *unstructured.Unstructured, now time.Time) (holder string, renewed time.Duration, fresh bool) {
	holder, _, _ = unstructured.NestedString(lease.Object, "spec", "holderIdentity")
	rt, _, _ := unstructured.NestedString(lease.Object, "spec", "renewTime")
	secs, _, _ := unstructured.NestedInt64(lease.Object, "spec", "leaseDurationSeconds")
	t, err := time.Parse(time.RFC3339Nano, rt)
	if holder == "" || err != nil {
		return holder, 0, false
	}
	renewed = now.Sub(t)
	return holder, renewed, renewed <= time.Duration(secs)*time.Second+5*time.Second
}

var (
	leaseGVR      = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// checkController checks the default shard's Lease (else its Deployment),
// and returns the controller's namespace and the shards' Leases found there
// (listed false when they could not be listed).
func checkController(ctx context.Context, c *checker, dyn dynamic.Interface, md metadata.Interface, o *checkOptions, now time.Time) (ns string, leases []shardLease, listed bool) {
	ns = o.controllerNamespace
	var lease *unstructured.Unstructured
	if ns == "" {
		l, err := dyn.Resource(leaseGVR).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", o.leaseID).String()})
		if err == nil && len(l.Items) > 0 {
			lease = &l.Items[0]
			ns = lease.GetNamespace()
		}
		if ns == "" {
			ns = DefaultControllerNamespace
		}
	}
	var leaseErr error
	if lease == nil {
		lease, leaseErr = dyn.Resource(leaseGVR).Namespace(ns).Get(ctx, o.leaseID, metav1.GetOptions{})
		if leaseErr != nil {
			lease = nil
		}
	}
	leases, forbidden, err := shardLeases(ctx, dyn, ns, o.leaseID, now)
	listed = !forbidden && err == nil
	switch {
	case forbidden && !apierrors.IsForbidden(leaseErr):
		c.note("you may not list the Leases of %s: the shards' Leases are not checked", ns)
	case err != nil:
		c.note("cannot list the Leases of %s: %v", ns, err)
	}
	if lease == nil && len(leases) > 0 && defaultShardAbsent(ctx, c, dyn, md, ns, o.leaseID) {
		return ns, leases, listed
	}
	if lease != nil {
		holder, renewed, fresh := leaseState(lease, now)
		switch {
		case fresh:
			c.ok("Lease %s/%s held by %s, renewed %s ago", ns, o.leaseID, holder, renewed.Round(time.Second))
			return ns, leases, listed
		case holder == "":
			c.fail("Lease %s/%s has no holder: no controller leads (is the Deployment scaled to 0?)", ns, o.leaseID)
		default:
			c.fail("Lease %s/%s held by %s but last renewed %s ago: its controller is not running", ns, o.leaseID, holder, renewed.Round(time.Second))
		}
	}
	d, err := dyn.Resource(deploymentGVR).Namespace(ns).Get(ctx, "kontinue", metav1.GetOptions{})
	if lease == nil && apierrors.IsForbidden(leaseErr) && apierrors.IsForbidden(err) {
		c.note("you may not read the Lease %s/%s nor the Deployment %s/kontinue: whether a controller runs cannot be told", ns, o.leaseID, ns)
		return ns, leases, listed
	}
	if err == nil {
		avail, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
		want, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
		if avail > 0 && lease == nil {
			if id, on := deploymentLeaseID(d); on && id != o.leaseID {
				c.fail("Deployment %s/kontinue: %d/%d available, with --leader-election-id=%s: check that Lease (kontinue check --leader-election-id %s)", ns, avail, want, id, id)
				return ns, leases, listed
			} else if on {
				// Its replicas elect a leader, so a running one holds the
				// Lease: available Pods without it run something else (an
				// image that is not Kontinue, fake nodes) or lead elsewhere.
				c.fail("Deployment %s/kontinue: %d/%d available, but no replica holds the Lease %s/%s that its --leader-elect needs: no controller leads (kubectl -n %s logs deployment/kontinue)", ns, avail, want, ns, id, ns)
				return ns, leases, listed
			}
			c.ok("Deployment %s/kontinue: %d/%d available (no Lease %s: leader election is off?)", ns, avail, want, o.leaseID)
			return ns, leases, listed
		}
		if avail == 0 {
			c.fail("Deployment %s/kontinue: no replica available (kubectl -n %s describe deployment kontinue)", ns, ns)
		}
		return ns, leases, listed
	}
	if lease == nil {
		c.fail("no Lease %s and no Deployment kontinue in namespace %s: is the controller running? (a controller run without --leader-elect leaves no trace to find; give --controller-namespace if it runs elsewhere)", o.leaseID, ns)
	}
	return ns, leases, listed
}

// deploymentLeaseID says whether the Deployment's kontinue container runs
// the controller with leader election (`--leader-elect`, as install.yaml
// and the chart do), and the Lease it then holds (`--leader-election-id`,
// default kontinue-leader).
func deploymentLeaseID(d *unstructured.Unstructured) (id string, on bool) {
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(cm, "args")
		id, on = DefaultLeaseID, false
		for i, a := range args {
			switch {
			case a == "--leader-elect" || a == "--leader-elect=true":
				on = true
			case a == "--leader-elect=false":
				on = false
			case strings.HasPrefix(a, "--leader-election-id="):
				id = strings.TrimPrefix(a, "--leader-election-id=")
			case a == "--leader-election-id" && i+1 < len(args):
				id = args[i+1]
			}
		}
		if on {
			return id, true
		}
	}
	return "", false
}

// ---- RBAC of a chain's service account

// stampVerbs are what a service account does to the objects it stamps:
// apply (create and patch), create (immutable objects, runs), delete
// (objects no step stamps any more, runs retention lets go).
var stampVerbs = []string{"create", "patch", "delete"}

var (
	serviceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	sarGVR            = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}
)

// parseServiceAccount reads NAMESPACE/NAME or NAME (in ns).
func parseServiceAccount(s, ns string) (string, string, error) {
	if a, b, ok := strings.Cut(s, "/"); ok {
		if a == "" || b == "" || strings.Contains(b, "/") {
			return "", "", usagef("--service-account %q: want NAMESPACE/NAME or NAME", s)
		}
		return a, b, nil
	}
	return ns, s, nil
}

// findChain reads the chain --chain names: KIND/NAME, or NAME of a
// ClusterSupplyChain or ClusterDelivery.
func findChain(ctx context.Context, dyn dynamic.Interface, ref string) (*unstructured.Unstructured, error) {
	kinds := []kindInfo{kindSupplyChain, kindDelivery}
	name := ref
	if k, n, ok := strings.Cut(ref, "/"); ok {
		ks, err := parseKinds(k)
		if err != nil || ks[0].category != catChain {
			return nil, usagef("--chain %q: want NAME or KIND/NAME with KIND clustersupplychain or clusterdelivery", ref)
		}
		kinds, name = ks, n
	}
	var found []*unstructured.Unstructured
	for _, k := range kinds {
		u, err := dyn.Resource(k.gvr()).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = append(found, u)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no ClusterSupplyChain or ClusterDelivery named %q", name)
	case 1:
		return found[0], nil
	}
	return nil, usagef("a ClusterSupplyChain and a ClusterDelivery are both named %q: give clustersupplychain/%s or clusterdelivery/%s", name, name, name)
}

// chainKinds are the kinds the templates of a chain's steps stamp, as far
// as they say without rendering, and notes on what cannot be known.
func chainKinds(spec api.ChainSpec, template func(kind, name string) *unstructured.Unstructured) (map[schema.GroupVersionKind][]string, []string) {
	kinds := map[schema.GroupVersionKind][]string{}
	var notes []string
	add := func(gvk schema.GroupVersionKind, step string) {
		for _, s := range kinds[gvk] {
			if s == step {
				return
			}
		}
		kinds[gvk] = append(kinds[gvk], step)
	}
	for _, step := range spec.Resources {
		names := []string{step.TemplateRef.Name}
		if len(step.TemplateRef.Options) > 0 {
			names = nil
			for _, o := range step.TemplateRef.Options {
				if o.Name != "" {
					names = append(names, o.Name)
				}
			}
		}
		for _, n := range names {
			u := template(step.TemplateRef.Kind, n)
			if u == nil {
				notes = append(notes, fmt.Sprintf("step [%s]: template %s/%s not found", step.Name, step.TemplateRef.Kind, n))
				continue
			}
			var ts api.TemplateSpec
			if err := api.Decode(u.Object["spec"], &ts); err != nil {
				notes = append(notes, fmt.Sprintf("step [%s]: template %s/%s is invalid: %v", step.Name, step.TemplateRef.Kind, n, err))
				continue
			}
			if ts.Runnable {
				add(schema.GroupVersionKind{Group: api.Group, Version: api.Version, Kind: api.KindRunnable}, step.Name)
			}
			if ts.Helm != nil {
				// Each helm step keeps its release in a Secret.
				add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, step.Name)
			}
			av, _ := ts.Template["apiVersion"].(string)
			k, _ := ts.Template["kind"].(string)
			switch {
			case ts.Template == nil:
				notes = append(notes, fmt.Sprintf("step [%s]: template %s/%s renders with an engine whose kinds are known only once rendered; the kinds its owners' steps stamped are checked", step.Name, step.TemplateRef.Kind, n))
			case av == "" || k == "" || strings.Contains(av+k, "$("):
				notes = append(notes, fmt.Sprintf("step [%s]: template %s/%s computes its apiVersion or kind; the kinds its owners' steps stamped are checked", step.Name, step.TemplateRef.Kind, n))
			default:
				add(schema.FromAPIVersionAndKind(av, k), step.Name)
			}
		}
	}
	return kinds, notes
}

// deniedVerbs are the verbs a SubjectAccessReview answered no to.
type deniedVerbs struct {
	verbs  []string
	reason string
}

func checkChainRBAC(ctx context.Context, c *checker, dyn dynamic.Interface, loaded *clientconfig.Loaded, o *checkOptions) error {
	chain, err := findChain(ctx, dyn, o.chain)
	if err != nil {
		return err
	}
	var spec api.ChainSpec
	if err := api.Decode(chain.Object["spec"], &spec); err != nil {
		return fmt.Errorf("cannot read spec of %s %s: %w", chain.GetKind(), chain.GetName(), err)
	}
	ns := loaded.Namespace
	saNS, saName := ns, "default"
	switch {
	case o.serviceAccount != "":
		if saNS, saName, err = parseServiceAccount(o.serviceAccount, ns); err != nil {
			return err
		}
	case spec.ServiceAccountRef != nil && spec.ServiceAccountRef.Name != "":
		saName = spec.ServiceAccountRef.Name
		if spec.ServiceAccountRef.Namespace != "" {
			saNS = spec.ServiceAccountRef.Namespace
		}
	}
	c.section(fmt.Sprintf("service account %s/%s stamping for %s %s in namespace %s", saNS, saName, chain.GetKind(), chain.GetName(), ns))
	if _, err := dyn.Resource(serviceAccountGVR).Namespace(saNS).Get(ctx, saName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		c.fail("ServiceAccount %s/%s does not exist: steps fail with ServiceAccountError", saNS, saName)
	} else if err != nil && !apierrors.IsForbidden(err) {
		return err
	}

	kinds, notes := chainKinds(spec, func(kind, name string) *unstructured.Unstructured {
		for _, k := range templateKinds {
			if k.kind == kind {
				u, err := dyn.Resource(k.gvr()).Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					return u
				}
			}
		}
		return nil
	})
	// What the chain's owners in the namespace stamped: exact, whatever the engine.
	owners, err := dyn.Resource(ownerKindOf(kindOfChain(chain)).gvr()).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for i := range owners.Items {
			v := view.Build(&owners.Items[i], nil)
			if v.Chain == nil || v.Chain.Name != chain.GetName() {
				continue
			}
			for _, s := range v.Steps {
				refs := append([]view.Ref{}, s.Objects...)
				if s.Stamped != nil {
					refs = append(refs, *s.Stamped)
				}
				for _, r := range refs {
					gvk := schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
					found := false
					for _, st := range kinds[gvk] {
						found = found || st == s.Name
					}
					if !found {
						kinds[gvk] = append(kinds[gvk], s.Name)
					}
				}
			}
		}
	}
	for _, n := range notes {
		c.note("%s", n)
	}
	if len(kinds) == 0 {
		c.note("no kind to check")
		return nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(loaded.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvks := make([]schema.GroupVersionKind, 0, len(kinds))
	for gvk := range kinds {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	user := "system:serviceaccount:" + saNS + ":" + saName
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"}
	for _, gvk := range gvks {
		steps := "step " + strings.Join(kinds[gvk], ", ")
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			c.fail("%s (%s): not served by the API server (is its CRD installed?): the step waits for it", gvk.Kind, steps)
			continue
		}
		d, err := denied(ctx, dyn, user, groups, ns, m.Resource)
		if err != nil {
			return err
		}
		res := m.Resource.Resource
		if m.Resource.Group != "" {
			res += "." + m.Resource.Group
		}
		if len(d.verbs) == 0 {
			c.ok("%s (%s): may %s", res, steps, strings.Join(stampVerbs, ", "))
			continue
		}
		msg := fmt.Sprintf("%s (%s): may not %s in %s", res, steps, strings.Join(d.verbs, ", "), ns)
		if d.reason != "" {
			msg += ": " + d.reason
		}
		c.fail("%s", msg)
	}
	return nil
}

func kindOfChain(u *unstructured.Unstructured) kindInfo {
	if u.GetKind() == kindDelivery.kind {
		return kindDelivery
	}
	return kindSupplyChain
}

// denied asks, with one SubjectAccessReview per verb, which of stampVerbs
// the user may not do to gvr in ns.
func denied(ctx context.Context, dyn dynamic.Interface, user string, groups []string, ns string, gvr schema.GroupVersionResource) (deniedVerbs, error) {
	var d deniedVerbs
	for _, verb := range stampVerbs {
		sar := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
			"spec": map[string]any{
				"user": user, "groups": toAny(groups),
				"resourceAttributes": map[string]any{"namespace": ns, "verb": verb, "group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource},
			},
		}}
		out, err := dyn.Resource(sarGVR).Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) {
				return d, fmt.Errorf("you may not create SubjectAccessReviews, so the rights of %s cannot be checked: %w", user, err)
			}
			return d, err
		}
		if ok, _, _ := unstructured.NestedBool(out.Object, "status", "allowed"); !ok {
			d.verbs = append(d.verbs, verb)
			if r, _, _ := unstructured.NestedString(out.Object, "status", "reason"); r != "" && d.reason == "" {
				d.reason = r
			}
		}
	}
	return d, nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
