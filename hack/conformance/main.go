// Command conformance is `make conformance`: it runs Cartographer v0.8.11's
// own kuttl suite, unmodified, against Kontinue.
//
// It starts the local control plane, runs the kontinue binary as a separate
// process the way the README tells users to (it installs its own CRDs), and
// runs kuttl over the suite's folders straight from the Go module cache. The
// suite's test CRDs (tests/resources/crds) are installed by kuttl; the
// Cartographer CRDs are not: Kontinue's own must satisfy the suite. At the
// end it prints one line per folder and exits non-zero if any folder failed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"kontinue.dev/kontinue/hack/localcluster"
)

// The suite's folders, relative to the Cartographer module root, in the
// order Cartographer's kuttl-test.yaml lists them.
var suiteDirs = []string{"tests/kuttl/runnable", "tests/kuttl/supplychain", "tests/kuttl/delivery"}

type options struct {
	focus    string        // run only folders whose name matches
	exclude  string        // folders listed as not run, with the reason below
	reason   string        // why excluded folders are not run
	timeout  int           // kuttl's per-step assert timeout, seconds
	parallel int           // kuttl's parallelism
	keep     bool          // keep the control plane's state folder on success
	deadline time.Duration // the whole run
	// controller is what the suite runs against: kontinue, or cartographer
	// itself (with its own CRDs), which checks the harness, not Kontinue.
	controller string
}

func main() {
	var o options
	flag.StringVar(&o.focus, "focus", "", "run only the folders whose name matches this regular expression")
	flag.StringVar(&o.exclude, "exclude", "", "folders (regular expression on the name) listed as not run")
	flag.StringVar(&o.reason, "exclude-reason", "not supported yet", "why the -exclude folders are not run (printed in the table)")
	flag.IntVar(&o.timeout, "timeout", 30, "seconds kuttl waits for each step's asserts (Cartographer's own CI uses 10 on bigger machines)")
	flag.IntVar(&o.parallel, "parallel", 8, "folders kuttl runs at once")
	flag.BoolVar(&o.keep, "keep", false, "keep the state folder (logs, kubeconfig) also when every folder passes")
	flag.DurationVar(&o.deadline, "deadline", 20*time.Minute, "the longest the whole run may take")
	flag.StringVar(&o.controller, "controller", "kontinue", "run the suite against kontinue, or against cartographer v0.8.11 itself (a check of this harness)")
	flag.Parse()
	if o.controller != "kontinue" && o.controller != "cartographer" {
		fmt.Fprintln(os.Stderr, "conformance: -controller must be kontinue or cartographer")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.deadline)
	defer cancel()

	root, err := localcluster.RepoRoot(".")
	if err != nil {
		return err
	}
	binDir, err := output(ctx, root, filepath.Join(root, "hack", "install-controlplane.sh"))
	if err != nil {
		return fmt.Errorf("building the control plane: %w", err)
	}
	kuttl, err := output(ctx, root, filepath.Join(root, "hack", "install-kuttl.sh"))
	if err != nil {
		return fmt.Errorf("building kuttl: %w", err)
	}
	carto, err := cartographerDir(ctx, root)
	if err != nil {
		return err
	}
	folders, err := listFolders(carto)
	if err != nil {
		return err
	}
	run, skipped, err := selectFolders(folders, o.focus, o.exclude)
	if err != nil {
		return err
	}
	if len(run) == 0 {
		return errors.New("no folder selected")
	}

	dir := filepath.Join(root, "_output", "conformance")
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: binDir, Dir: filepath.Join(dir, "cluster"), Log: io.Discard})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { _ = cluster.Stop() }()

	if err := grantServiceAccounts(ctx, cluster.Kubeconfig); err != nil {
		return fmt.Errorf("granting the suite's service accounts: %w", err)
	}

	logPath := filepath.Join(dir, o.controller+".log")
	var stopController func()
	if o.controller == "cartographer" {
		stopController, err = startCartographer(ctx, root, carto, cluster.Kubeconfig, dir, logPath)
	} else {
		stopController, err = startKontinue(ctx, root, cluster.Kubeconfig, logPath)
	}
	if err != nil {
		return err
	}
	defer stopController()
	if err := waitForCRDs(ctx, cluster.Kubeconfig); err != nil {
		return fmt.Errorf("%s's CRDs are not served (log: %s): %w", o.controller, logPath, err)
	}

	cfg := filepath.Join(dir, "kuttl-test.yaml")
	if err := writeSuiteConfig(cfg, carto, dir, o); err != nil {
		return err
	}
	start := time.Now()
	kuttlLog := filepath.Join(dir, "kuttl.log")
	runErr := runKuttl(ctx, kuttl, cfg, cluster.Kubeconfig, kuttlLog, run)
	took := time.Since(start)

	results, repErr := readReport(filepath.Join(dir, "kuttl-report.json"))
	failed := printTable(os.Stdout, run, skipped, o.reason, results)
	fmt.Printf("\nkuttl took %s for %d folders (%d not run); logs: %s, %s\n", took.Round(time.Second), len(run), len(skipped), kuttlLog, logPath)
	switch {
	case repErr != nil:
		return fmt.Errorf("reading kuttl's report (%v); kuttl: %v", repErr, runErr)
	case failed > 0:
		return fmt.Errorf("%d of %d folders failed", failed, len(run))
	case runErr != nil:
		return fmt.Errorf("kuttl failed although every folder passed: %w", runErr)
	}
	if !o.keep {
		stopController()
		_ = cluster.Stop()
		_ = os.RemoveAll(filepath.Join(dir, "cluster"))
	}
	return nil
}

// output runs a command and returns its trimmed standard output; its
// standard error goes to ours, so build progress stays visible.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// cartographerDir returns the Cartographer module's folder in the module
// cache, downloading it once; hack/cartographer's go.sum pins its content.
func cartographerDir(ctx context.Context, root string) (string, error) {
	out, err := output(ctx, filepath.Join(root, "hack", "cartographer"), "go", "mod", "download", "-json", "github.com/vmware-tanzu/cartographer")
	if err != nil {
		return "", fmt.Errorf("downloading Cartographer's module: %w", err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return "", fmt.Errorf("reading go mod download's answer: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("downloading Cartographer's module: %s", m.Error)
	}
	return m.Dir, nil
}

// folder is one kuttl test: a folder of numbered steps.
type folder struct {
	Suite string // e.g. supplychain
	Name  string // e.g. workload-status
}

func (f folder) String() string { return f.Suite + "/" + f.Name }

func listFolders(carto string) ([]folder, error) {
	var out []folder
	for _, d := range suiteDirs {
		entries, err := os.ReadDir(filepath.Join(carto, d))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, folder{Suite: filepath.Base(d), Name: e.Name()})
			}
		}
	}
	return out, nil
}

func selectFolders(all []folder, focus, exclude string) (run, skipped []folder, err error) {
	match := func(expr string) (func(folder) bool, error) {
		if expr == "" {
			return func(folder) bool { return false }, nil
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, err
		}
		return func(f folder) bool { return re.MatchString(f.Name) || re.MatchString(f.String()) }, nil
	}
	focused, err := match(focus)
	if err != nil {
		return nil, nil, fmt.Errorf("-focus: %w", err)
	}
	excluded, err := match(exclude)
	if err != nil {
		return nil, nil, fmt.Errorf("-exclude: %w", err)
	}
	for _, f := range all {
		switch {
		case focus != "" && !focused(f):
		case excluded(f):
			skipped = append(skipped, f)
		default:
			run = append(run, f)
		}
	}
	return run, skipped, nil
}

func startKontinue(ctx context.Context, root, kubeconfig, logPath string) (stop func(), err error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	k := exec.Command(filepath.Join(root, "_output", "bin", "kontinue"), "controller", "--kubeconfig", kubeconfig, "--install-crds",
		"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0")
	k.Stdout, k.Stderr = logf, logf
	if err := k.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting kontinue (run `make build` first): %w", err)
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		_ = k.Process.Signal(syscall.SIGTERM)
		_, _ = k.Process.Wait()
		logf.Close()
	}, nil
}

// waitForCRDs waits until the API server serves carto.run: kuttl's first
// steps create Cartographer objects at once.
func waitForCRDs(ctx context.Context, kubeconfig string) error {
	return pollServed(ctx, kubeconfig, "carto.run/v1alpha1", []string{"workloads", "deliverables", "runnables", "clustersupplychains", "clusterdeliveries", "clusterruntemplates"})
}

func writeSuiteConfig(path, carto, dir string, o options) error {
	var b bytes.Buffer
	b.WriteString("# Written by hack/conformance: Cartographer v0.8.11's suite against a running Kontinue.\n")
	b.WriteString("apiVersion: kuttl.dev/v1beta1\nkind: TestSuite\nstartControlPlane: false\n")
	b.WriteString("testDirs:\n")
	for _, d := range suiteDirs {
		fmt.Fprintf(&b, "  - %q\n", filepath.Join(carto, d))
	}
	fmt.Fprintf(&b, "manifestDirs:\n  - %q\n", filepath.Join(carto, "tests", "resources", "crds"))
	fmt.Fprintf(&b, "timeout: %d\nparallel: %d\nartifactsDir: %q\nreportFormat: JSON\nreportName: kuttl-report\nreportGranularity: test\n",
		o.timeout, o.parallel, dir)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func runKuttl(ctx context.Context, kuttl, cfg, kubeconfig, logPath string, folders []folder) error {
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	// kuttl matches --test against each test's folder name (as go test's
	// -run does against a subtest), so an anchored alternation selects
	// exactly these folders. go test makes a repeated subtest name unique
	// with a "#01" suffix: folders of the same name in two suite folders
	// (options, CRDs) need it.
	names := map[string]bool{}
	for _, f := range folders {
		names[regexp.QuoteMeta(f.Name)] = true
	}
	alts := make([]string, 0, len(names))
	for n := range names {
		alts = append(alts, n)
	}
	sort.Strings(alts)
	cmd := exec.CommandContext(ctx, kuttl, "test", "--config", cfg, "--test", "^("+strings.Join(alts, "|")+")(#[0-9]+)?$")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	// kuttl writes a kubeconfig file into its working folder.
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	return cmd.Run()
}

type report struct {
	Testsuite []struct {
		Name     string `json:"name"`
		Testcase []struct {
			Name    string `json:"name"`
			Time    string `json:"time"`
			Failure *struct {
				Message string `json:"message"`
				Text    string `json:"text"`
			} `json:"failure"`
		} `json:"testcase"`
	} `json:"testsuite"`
}

type result struct {
	ran     bool
	failure string
	time    string
}

func readReport(path string) (map[string]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := map[string]result{}
	for _, s := range r.Testsuite {
		suite := filepath.Base(s.Name)
		for _, c := range s.Testcase {
			res := result{ran: true, time: c.Time}
			if c.Failure != nil {
				res.failure = strings.TrimSpace(c.Failure.Message + " " + c.Failure.Text)
			}
			out[suite+"/"+c.Name] = res
		}
	}
	return out, nil
}

// printTable prints one line per folder and returns how many failed (a
// folder kuttl did not report counts as failed).
func printTable(w io.Writer, run, skipped []folder, reason string, results map[string]result) int {
	failed := 0
	fmt.Fprintf(w, "\n%-62s %-8s %s\n", "FOLDER", "RESULT", "DETAIL")
	all := append(append([]folder{}, run...), skipped...)
	sort.Slice(all, func(i, j int) bool { return all[i].String() < all[j].String() })
	isSkipped := map[string]bool{}
	for _, f := range skipped {
		isSkipped[f.String()] = true
	}
	pass := 0
	for _, f := range all {
		r, ok := results[f.String()]
		switch {
		case isSkipped[f.String()]:
			fmt.Fprintf(w, "%-62s %-8s %s\n", f, "not run", reason)
		case !ok || !r.ran:
			failed++
			fmt.Fprintf(w, "%-62s %-8s %s\n", f, "FAIL", "no result from kuttl")
		case r.failure != "":
			failed++
			fmt.Fprintf(w, "%-62s %-8s %s\n", f, "FAIL", oneLine(r.failure, 160))
		default:
			pass++
			fmt.Fprintf(w, "%-62s %-8s %ss\n", f, "pass", r.time)
		}
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", pass, failed, len(skipped))
	return failed
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
