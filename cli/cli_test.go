package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/version"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ with what the code prints")

// golden compares got with testdata/NAME (or writes it with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test ./cli -update")
	require.Equal(t, string(want), got, "differs from %s (go test ./cli -update rewrites it)", path)
}

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := MainContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := run(args...)
		require.Equal(t, 0, code)
		require.Equal(t, "kontinue "+version.Next()+"-dev\n", out, "a build that stamps no version is version/VERSION-dev")
	}
}

// TestBareCommandPrintsHelp: without a subcommand the binary only prints
// help; it never starts anything.
func TestBareCommandPrintsHelp(t *testing.T) {
	code, out, _ := run()
	require.Equal(t, 0, code)
	require.Contains(t, out, "Usage:\n  kontinue [command]")
	code, out2, _ := run("--help")
	require.Equal(t, 0, code)
	require.Equal(t, out, out2)
}

func TestHelpTopics(t *testing.T) {
	root := New(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	for _, c := range root.Command.Commands() {
		code, out, _ := run(c.Name(), "--help")
		require.Equal(t, 0, code, c.Name())
		require.Contains(t, out, "kontinue "+c.Name(), c.Name())
		require.Contains(t, out, "Examples:\n  ", "%s --help has examples", c.Name())
		code, out2, _ := run("help", c.Name())
		require.Equal(t, 0, code)
		require.Equal(t, out, out2, "help %s", c.Name())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"}, {"get"}, {"get", "gadgets"}, {"get", "workload", "-x"}, {"get", "workload", "a", "-A"},
		{"get", "workload", "-o", "table=x"}, {"get", "workload", "-o", "jsonpath="}, {"get", "workload", "--status-selector", "ready"},
		{"get", "templates", "--status-selector", "ready=true"}, {"get", "templates", "x"}, {"get", "wld", "a", "-l", "x=y"},
		{"reconcile", "workload"}, {"reconcile", "clustersupplychain", "x"}, {"version", "extra"}, {"dashboard", "extra"},
		{"render", "-f", "x", "--step-output", "bad"}, {"render"}, {"events", "workload"}, {"check", "--service-account", "a/b/c", "--chain", "x"},
		{"get", "wld", "--color", "sometimes"},
	} {
		code, _, errOut := run(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "--help' for usage", args)
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	code, _, errOut := run("gte", "workloads")
	require.Equal(t, 2, code)
	require.Equal(t, "kontinue: unknown command \"gte\"\n\nDid you mean this?\n\tget\n\nRun 'kontinue --help' for usage.\n", errOut)

	code, _, errOut = run("get", "workloadz")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `did you mean workloads?`)
	require.Contains(t, errOut, `unknown kind "workloadz"`, "the message names what was typed, not the suggestion")
}

// TestGlobalFlagsBeforeCommand: `kontinue -n dev get wl` is kubectl's
// order; the flags reach the command (here: a server nobody listens on).
func TestGlobalFlagsBeforeCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	code, _, errOut := run("-n", "dev", "--server", "https://127.0.0.1:1", "--request-timeout", "2s", "get", "wl")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "kontinue get: ")
	require.Contains(t, errOut, "127.0.0.1:1", "the --server flag given before the command")
	require.Contains(t, errOut, "/namespaces/dev/workloads", "-n given before the command")
}

func TestPluginName(t *testing.T) {
	var out bytes.Buffer
	code := New(Env{Stdout: &out, Stderr: &out, Program: "/usr/local/bin/kubectl-kontinue"}).Execute(context.Background(), []string{"get", "--help"})
	require.Equal(t, 0, code)
	require.Contains(t, out.String(), "Usage:\n  kubectl kontinue get KIND [NAME] [flags]")
	require.Contains(t, out.String(), "\n  kubectl kontinue get workload app -n dev\n")
	require.NotContains(t, out.String(), "\n  kontinue ")

	out.Reset()
	code = New(Env{Stdout: &out, Stderr: &out, Program: "kubectl-kontinue"}).Execute(context.Background(), []string{"nope"})
	require.Equal(t, 2, code)
	require.Contains(t, out.String(), "kubectl kontinue: unknown command \"nope\"")
	require.Contains(t, out.String(), "Run 'kubectl kontinue --help' for usage.")
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := run("completion", shell)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "kontinue", shell)
	}
	// Kinds complete offline.
	code, out, _ := run("__complete", "get", "work")
	require.Equal(t, 0, code)
	require.Equal(t, "workloads\n:4\n", out)
}

// ---- get, fed from fixtures

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixtures(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "get", "objects.yaml"))
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(j)) // integers stay int64, as from the API server
		objs = append(objs, u)
	}
	return objs
}

// printGet prints what `get KIND` (flags as args) shows of the fixtures.
func printGet(t *testing.T, ns string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{env: Env{Stdout: &out, Stderr: &errb, Now: func() time.Time { return testNow }, Getenv: func(string) string { return "" }}}
	o := &getOptions{}
	c := getCommand(a)
	require.NoError(t, c.Flags().Parse(args[1:]))
	o.output, _ = c.Flags().GetString("output")
	o.status, _ = c.Flags().GetStringSlice("status-selector")
	o.noHeaders, _ = c.Flags().GetBool("no-headers")
	colorOpt, _ := c.Flags().GetString("color")
	ks, err := parseKinds(args[0])
	require.NoError(t, err)
	out2, err := parseOutput(o.output)
	require.NoError(t, err)
	status, err := parseStatusSelector(o.status)
	require.NoError(t, err)
	g := &getter{ctx: context.Background(), a: a, o: o, out: out2, ns: ns, color: colorOpt == "always", status: status, now: testNow,
		runnables: map[string]*unstructured.Unstructured{}, owners: map[string][]view.Owner{}}
	p := g.printerFor(ks)
	var objs []*unstructured.Unstructured
	for _, u := range fixtures(t) {
		if u.GetKind() == kindRunnable.kind {
			g.runnables[u.GetNamespace()+"/"+u.GetName()] = u // as one LIST reads them
		}
		for _, k := range ks {
			if u.GetKind() == k.kind && (ns == "" || !k.namespaced || u.GetNamespace() == ns) {
				if g.matches(p, u) {
					objs = append(objs, u)
				}
			}
		}
		if u.GetKind() == kindWorkload.kind {
			g.owners[kindWorkload.kind] = append(g.owners[kindWorkload.kind], view.Build(u, nil))
		}
	}
	sortObjects(objs)
	_, err = g.printList(context.Background(), ks, p, objs)
	require.NoError(t, err)
	return out.String() + errb.String()
}

func TestGetTables(t *testing.T) {
	for _, tc := range []struct {
		name, ns string
		args     []string
	}{
		{"workloads-A", "", []string{"workloads"}},
		{"workloads-dev", "dev", []string{"wld"}},
		{"workloads-wide", "", []string{"wl", "-o", "wide"}},
		{"workloads-not-ready", "", []string{"workloads", "--status-selector", "ready=false"}},
		{"workloads-name", "", []string{"workloads", "-o", "name"}},
		{"workloads-no-headers", "dev", []string{"workloads", "--no-headers"}},
		{"workloads-custom-columns", "", []string{"workloads", "-o", "custom-columns=NS:.namespace,NAME:.name,CHAIN:.chain.name,READY:.ready.status,RUN:.steps[*].runnable.latestRun.name"}},
		{"workloads-jsonpath", "", []string{"workloads", "-o", `jsonpath={range .items[*]}{.name}={.ready.status}{"\n"}{end}`}},
		{"deliverables-none", "dev", []string{"dlv"}},
		{"chains", "", []string{"csc"}},
		{"chains-wide", "", []string{"clustersupplychains", "-o", "wide"}},
		{"chains-not-ready", "", []string{"supplychains", "--status-selector", "Ready=False"}},
		{"templates", "", []string{"templates"}},
		{"templates-cst", "", []string{"cst"}},
		{"runnables-A", "", []string{"runnables"}},
		{"runnables-wide", "prod", []string{"run", "-o", "wide"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, "get/"+tc.name+".txt", printGet(t, tc.ns, tc.args...))
		})
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestGetColourKeepsColumns: the same table with and without colour, once
// the escape sequences are gone.
func TestGetColourKeepsColumns(t *testing.T) {
	for _, kind := range []string{"workloads", "csc", "runnables"} {
		plainOut := printGet(t, "", kind)
		colored := printGet(t, "", kind, "--color", "always")
		require.Contains(t, colored, "\x1b[", kind)
		require.Equal(t, plainOut, ansi.ReplaceAllString(colored, ""), kind)
	}
	golden(t, "get/workloads-color.txt", printGet(t, "", "workloads", "--color", "always"))
}

func TestGetJSONIsTheDataModel(t *testing.T) {
	golden(t, "get/workloads-dev.json", printGet(t, "dev", "workloads", "-o", "json"))
	golden(t, "get/runnables-prod.yaml", printGet(t, "prod", "runnables", "-o", "yaml"))
	golden(t, "get/chains.json", printGet(t, "", "csc", "-o", "json"))
}

func TestTrees(t *testing.T) {
	var out bytes.Buffer
	byName := map[string]*unstructured.Unstructured{}
	for _, u := range fixtures(t) {
		byName[u.GetKind()+"/"+u.GetName()] = u
	}
	runnables := map[string]*unstructured.Unstructured{"prod/web-tests": byName["Runnable/web-tests"]}
	for _, n := range []string{"Workload/app", "Workload/api", "Workload/web"} {
		printTree(&out, view.Build(byName[n], runnables), false)
		out.WriteString("\n")
	}
	var owners []view.Owner
	for _, n := range []string{"Workload/app", "Workload/api", "Workload/web"} {
		owners = append(owners, view.Build(byName[n], nil))
	}
	for _, n := range []string{"ClusterSupplyChain/source-to-url", "ClusterSupplyChain/testing"} {
		cs := []view.Chain{view.BuildChain(byName[n])}
		view.Count(cs, owners)
		printChainTree(&out, cs[0], true, false)
		out.WriteString("\n")
	}
	golden(t, "get/trees.txt", out.String())
}

func TestParseOutput(t *testing.T) {
	for _, ok := range []string{"", "tree", "wide", "name", "json", "yaml", "jsonpath={.name}", "custom-columns=A:.a,B:b"} {
		_, err := parseOutput(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"table=1", "xml", "jsonpath=", "jsonpath={.a", "custom-columns=", "custom-columns=A", "custom-columns=A:{.a"} {
		_, err := parseOutput(bad)
		require.Error(t, err, bad)
	}
}

func TestParseKinds(t *testing.T) {
	for in, want := range map[string]string{
		"wld": "Workload", "wl": "Workload", "Workloads": "Workload", "workload.carto.run": "Workload", "dlv": "Deliverable",
		"csc": "ClusterSupplyChain", "supplychains": "ClusterSupplyChain", "cd": "ClusterDelivery", "deliveries": "ClusterDelivery",
		"cst": "ClusterSourceTemplate", "crt": "ClusterRunTemplate", "run": "Runnable", "runnables.carto.run": "Runnable",
	} {
		ks, err := parseKinds(in)
		require.NoError(t, err, in)
		require.Len(t, ks, 1)
		require.Equal(t, want, ks[0].kind, in)
	}
	ks, err := parseKinds("templates")
	require.NoError(t, err)
	require.Len(t, ks, 6)
}
