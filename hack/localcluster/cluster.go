// Package localcluster starts a local Kubernetes control plane (etcd,
// kube-apiserver and kube-controller-manager) on 127.0.0.1 for tests and
// development, from binaries built by hack/install-controlplane.sh.
//
// By default there is no scheduler and no kubelet: Pods never run. The
// garbage collector, the namespace controller, the service-account
// controllers and the ClusterRole aggregation controller run, so
// ownerReferences, namespace deletion, default ServiceAccounts, TokenRequest
// and aggregated roles (the chart's kontinue-view and kontinue-edit) behave
// as in a real cluster.
//
// With Options.Workloads, the workload controllers run too, with
// kube-scheduler and kwok playing the kubelet of fake nodes: Deployments
// roll out, Jobs complete, with the status their real controllers write.
// With Options.Tekton, Tekton Pipelines' controller runs as well.
package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configures Start.
type Options struct {
	// BinDir holds the etcd, kube-apiserver and kube-controller-manager
	// binaries.
	BinDir string
	// Dir is the state folder (etcd data, certificates, logs, pids,
	// kubeconfig). It is created, and wiped at Start. A non-empty folder that
	// was not made by this package is refused, as is one whose cluster is
	// still running.
	Dir string
	// Log receives progress lines; may be nil.
	Log io.Writer
	// Detach lets the components outlive the process that started them (the
	// CLI's start command). When false they are killed by the kernel if the
	// starting process dies (Linux), so a test that crashes leaves nothing
	// behind. In both cases they ignore the context passed to Start once
	// Start has returned; Stop stops them.
	Detach bool
	// APIServerArgs and ControllerManagerArgs are appended to the generated
	// flags (a repeated flag overrides the generated one).
	APIServerArgs         []string
	ControllerManagerArgs []string

	// Workloads, when set, runs the workload controllers, kube-scheduler
	// (from BinDir) and kwok with fake nodes.
	Workloads *Workloads
	// Tekton, when set, runs Tekton Pipelines' webhook and controller; needs
	// Workloads.
	Tekton *Tekton
	// Audit, when set, makes kube-apiserver write an audit log
	// (Cluster.AuditLog): by default every write, with its bodies.
	Audit *Audit
	// SchedulerArgs, KwokArgs and TektonArgs are appended to the generated
	// flags of those components.
	SchedulerArgs, KwokArgs, TektonArgs []string
	// BeforeControllers, when set, runs once the API server is ready (and
	// Kubeconfig written), before the controller-manager starts: the place
	// to install CRDs, so that the garbage collector knows their kinds from
	// its start (a kind added later is collected only after its next
	// discovery, about 30s).
	BeforeControllers func(ctx context.Context, c *Cluster) error
}

// Cluster is a running control plane.
type Cluster struct {
	Dir        string // state folder (absolute)
	Kubeconfig string // admin kubeconfig: Dir/kubeconfig
	Host       string // https://127.0.0.1:<port>

	// Admin credentials, PEM files (the admin user is in system:masters).
	CAFile   string
	CertFile string
	KeyFile  string

	mu    sync.Mutex
	procs []*process // in start order

	tektonWebhookPort int // Tekton's webhook listens here (installTekton picks it)

	// AuditLog is the kube-apiserver's audit log (Options.Audit), else "".
	AuditLog string
}

// Process describes one component of a cluster.
type Process struct {
	Name    string // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, tekton-pipelines-webhook, tekton-pipelines-controller
	Pid     int
	Path    string // binary
	LogFile string
	Running bool
}

// ErrNotRunning is returned by Attach when Dir holds no started cluster.
var ErrNotRunning = errors.New("no local cluster in this folder")

const (
	etcdName      = "etcd"
	apiserverName = "kube-apiserver"
	kcmName       = "kube-controller-manager"

	markerFile = ".kontinue-local-cluster"

	serviceCIDR = "10.0.0.0/24"
	saIssuer    = "https://kubernetes.default.svc.cluster.local"

	// Controllers run by kube-controller-manager (names as accepted by 1.32).
	controllers = "garbage-collector-controller,namespace-controller," +
		"serviceaccount-controller,serviceaccount-token-controller,clusterrole-aggregation-controller"

	bindAttempts = 3
	stopGrace    = 10 * time.Second
)

var (
	etcdTimeout      = 30 * time.Second
	apiserverTimeout = 90 * time.Second
	kcmTimeout       = 60 * time.Second

	// freePorts is a variable so that tests can hand out busy ports.
	freePorts = pickFreePorts
)

// Start starts etcd, kube-apiserver and kube-controller-manager and returns
// once each is ready. ctx bounds the start only. On failure everything
// started is stopped and the error names the failed step, with the tail of
// that component's log.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(logw, format+"\n", args...) }
	if o.Dir == "" {
		return nil, errors.New("localcluster: Options.Dir is empty")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	if o.BinDir == "" {
		return nil, errors.New("localcluster: Options.BinDir is empty")
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	if err := HaveBinaries(o.BinDir); err != nil {
		return nil, fmt.Errorf("localcluster: %w (run hack/local-cluster.sh install)", err)
	}
	if o.Workloads != nil {
		if err := o.Workloads.check(o.BinDir); err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
	}
	if o.Tekton != nil {
		if o.Workloads == nil {
			return nil, errors.New("localcluster: Options.Tekton needs Options.Workloads (kwok runs its Pods)")
		}
		if err := o.Tekton.check(); err != nil {
			return nil, fmt.Errorf("localcluster: %w", err)
		}
	}
	if err := prepareDir(dir); err != nil {
		return nil, fmt.Errorf("localcluster: state folder: %w", err)
	}

	c := &Cluster{
		Dir:        dir,
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
	}
	defer func() {
		if err != nil {
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w\n(and stopping what was started: %v)", err, serr)
			}
		}
	}()
	begin := time.Now()
	logsDir := filepath.Join(dir, "logs")

	// Certificates.
	p, err := newPKI()
	if err != nil {
		return nil, fmt.Errorf("localcluster: certificates: %w", err)
	}
	files, err := p.write(filepath.Join(dir, "certs"))
	if err != nil {
		return nil, fmt.Errorf("localcluster: certificates: %w", err)
	}
	c.CAFile, c.CertFile, c.KeyFile = files.caCert, files.adminCert, files.adminKey
	logf("certificates ready after %.1fs", time.Since(begin).Seconds())

	// etcd.
	var etcdURL string
	err = c.startComponent(ctx, logf, etcdName, etcdTimeout, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, nil, err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(dir, "etcd")
		if err := os.RemoveAll(dataDir); err != nil { // from a failed attempt
			return nil, nil, err
		}
		proc, err := launch(etcdName, bin(etcdName), []string{
			"--name=local",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=local=" + peer,
			"--initial-cluster-state=new",
			"--unsafe-no-fsync=true",
			// The 2 GiB default is reached by bench's 50,000 Workloads
			// (200,000 objects, each written several times between compactions).
			"--quota-backend-bytes=8589934592",
			"--log-level=warn",
		}, nil, dir, filepath.Join(logsDir, etcdName+".log"), o.Detach)
		etcdURL = client
		return proc, func(ctx context.Context) error { return etcdHealthy(ctx, client) }, err
	})
	if err != nil {
		return nil, err
	}

	// kube-apiserver.
	var auditArgs []string
	if o.Audit != nil {
		if auditArgs, c.AuditLog, err = o.Audit.auditArgs(dir); err != nil {
			return nil, fmt.Errorf("localcluster: audit: %w", err)
		}
	}
	client, err := c.HTTPClient()
	if err != nil {
		return nil, fmt.Errorf("localcluster: admin client: %w", err)
	}
	err = c.startComponent(ctx, logf, apiserverName, apiserverTimeout, func() (*process, func(context.Context) error, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, nil, err
		}
		args := []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(dir, "certs"),
			"--tls-cert-file=" + files.apiserverCert,
			"--tls-private-key-file=" + files.apiKey,
			"--client-ca-file=" + files.caCert,
			"--authorization-mode=RBAC",
			"--service-cluster-ip-range=" + serviceCIDR,
			"--allow-privileged=true",
			"--disable-admission-plugins=ServiceAccount",
			"--service-account-issuer=" + saIssuer,
			"--service-account-key-file=" + files.saPub,
			"--service-account-signing-key-file=" + files.saKey,
			"--endpoint-reconciler-type=none",
		}
		args = append(args, auditArgs...)
		proc, err := launch(apiserverName, bin(apiserverName), append(args, o.APIServerArgs...),
			nil, dir, filepath.Join(logsDir, apiserverName+".log"), o.Detach)
		c.Host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		return proc, func(ctx context.Context) error { return probe(ctx, client, c.Host+"/readyz", http.StatusOK) }, err
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.Kubeconfig, kubeconfig(c.Host, p.ca, p.admin, "admin"), 0o600); err != nil {
		return nil, fmt.Errorf("localcluster: kubeconfig: %w", err)
	}
	kcmKubeconfig := filepath.Join(dir, "certs", "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(kcmKubeconfig, kubeconfig(c.Host, p.ca, p.kcm, kcmName), 0o600); err != nil {
		return nil, fmt.Errorf("localcluster: kubeconfig: %w", err)
	}

	// kube-controller-manager: up once it has created the default
	// ServiceAccount of namespace default.
	if o.Tekton != nil {
		if err := c.installTekton(ctx, logf, o); err != nil {
			return nil, err
		}
	}
	if o.BeforeControllers != nil {
		if err := o.BeforeControllers(ctx, c); err != nil {
			return nil, fmt.Errorf("localcluster: before the controllers: %w", err)
		}
	}
	kcmControllers := controllers
	if o.Workloads != nil {
		kcmControllers = workloadControllers
	}
	err = c.startComponent(ctx, logf, kcmName, kcmTimeout, func() (*process, func(context.Context) error, error) {
		args := []string{
			"--kubeconfig=" + kcmKubeconfig,
			"--controllers=" + kcmControllers,
			"--service-account-private-key-file=" + files.saKey,
			"--root-ca-file=" + files.caCert,
			"--use-service-account-credentials=false",
			"--leader-elect=false",
			"--secure-port=0",
		}
		proc, err := launch(kcmName, bin(kcmName), append(args, o.ControllerManagerArgs...),
			nil, dir, filepath.Join(logsDir, kcmName+".log"), o.Detach)
		sa := c.Host + "/api/v1/namespaces/default/serviceaccounts/default"
		return proc, func(ctx context.Context) error { return probe(ctx, client, sa, http.StatusOK) }, err
	})
	if err != nil {
		return nil, err
	}
	if o.Workloads != nil {
		if err := c.startWorkloads(ctx, logf, o); err != nil {
			return nil, err
		}
	}
	if o.Tekton != nil {
		if err := c.startTekton(ctx, logf, o); err != nil {
			return nil, err
		}
	}
	logf("cluster ready after %.1fs: export KUBECONFIG=%s", time.Since(begin).Seconds(), c.Kubeconfig)
	return c, nil
}

// startComponent launches a component with launchFn and waits until its
// probe succeeds, retrying with new ports when a port turned out taken.
func (c *Cluster) startComponent(ctx context.Context, logf func(string, ...any), name string, timeout time.Duration,
	launchFn func() (*process, func(context.Context) error, error)) error {
	for attempt := 1; ; attempt++ {
		t0 := time.Now()
		proc, ready, err := launchFn()
		if err != nil {
			return fmt.Errorf("localcluster: start %s: %w", name, err)
		}
		c.add(proc)
		if err := writePids(c.Dir, c.procs); err != nil {
			return fmt.Errorf("localcluster: start %s: pids file: %w", name, err)
		}
		err = waitReady(ctx, proc, timeout, ready)
		if err == nil {
			logf("%s ready after %.1fs", name, time.Since(t0).Seconds())
			return nil
		}
		if ctx.Err() == nil && attempt < bindAttempts && bindFailed(proc.logPath) {
			logf("%s: a port was taken (attempt %d, %.1fs), retrying with new ports", name, attempt, time.Since(t0).Seconds())
			if serr := proc.stop(stopGrace); serr != nil {
				return fmt.Errorf("localcluster: start %s: %w", name, serr)
			}
			c.remove(proc)
			continue
		}
		return fmt.Errorf("localcluster: start %s: %w\n--- last 20 lines of %s ---\n%s",
			name, err, proc.logPath, tail(proc.logPath, 20))
	}
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or
// timeout passes.
func waitReady(ctx context.Context, p *process, timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last error
	for {
		// A probe can hang (e.g. on a port that someone else accepts on):
		// give up as soon as the process exits.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		go func() {
			select {
			case <-p.done:
				cancel()
			case <-pctx.Done():
			}
		}()
		last = ready(pctx)
		cancel()
		if last == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("exited before it was ready (%v)", p.waitErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready (last check: %v): %w", last, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("not ready after %s (last check: %v)", timeout, last)
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func etcdHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("GET %s/health: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func probe(ctx context.Context, client *http.Client, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// pickFreePorts returns n distinct ports that were free on 127.0.0.1.
func pickFreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close() // held until all are picked, so they are distinct
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// prepareDir empties dir (keeping it) after checking that it is ours and
// that no cluster still runs from it.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
			return fmt.Errorf("%s is not empty and was not made by localcluster; refusing to wipe it", dir)
		}
		if procs, err := readPids(dir); err == nil {
			for _, p := range procs {
				if p.running() {
					return fmt.Errorf("a cluster still runs from %s (%s pid %d); stop it first", dir, p.name, p.pid)
				}
			}
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "certs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, markerFile), []byte("made by kontinue.dev/kontinue/hack/localcluster\n"), 0o600)
}

func (c *Cluster) add(p *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

func (c *Cluster) remove(p *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			break
		}
	}
	_ = writePids(c.Dir, c.procs)
}

// Attach returns the cluster started (by another process) in dir, from its
// pids file and kubeconfig. Its Stop stops only the recorded processes
// that still run the recorded binary from dir. It returns ErrNotRunning
// when dir has no pids file.
func Attach(dir string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	procs, err := readPids(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Dir:        dir,
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		CAFile:     filepath.Join(dir, "certs", "ca.crt"),
		CertFile:   filepath.Join(dir, "certs", "admin.crt"),
		KeyFile:    filepath.Join(dir, "certs", "admin.key"),
		procs:      procs,
	}
	if data, err := os.ReadFile(c.Kubeconfig); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(line), "server: "); ok {
				c.Host = s
				break
			}
		}
	}
	return c, nil
}

// Processes lists the components, in start order.
func (c *Cluster) Processes() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Process, 0, len(c.procs))
	for _, p := range c.procs {
		out = append(out, Process{Name: p.name, Pid: p.pid, Path: p.path, LogFile: p.logPath, Running: p.running()})
	}
	return out
}

// Running reports whether every component runs (at least etcd, the
// apiserver and the controller-manager).
func (c *Cluster) Running() bool {
	ps := c.Processes()
	for _, p := range ps {
		if !p.Running {
			return false
		}
	}
	return len(ps) >= 3
}

// HTTPClient returns a client that trusts the cluster CA and authenticates
// as the admin (system:masters).
func (c *Cluster) HTTPClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no certificate", c.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// Ready checks the apiserver's /readyz.
func (c *Cluster) Ready(ctx context.Context) error {
	client, err := c.HTTPClient()
	if err != nil {
		return err
	}
	return probe(ctx, client, c.Host+"/readyz", http.StatusOK)
}

// Stop stops the components it knows of (SIGTERM, then SIGKILL after 10s)
// and waits for them to exit: the API server's clients first (so that
// they do not log its absence), then the apiserver, etcd last. It removes
// the pids file; data and logs stay in Dir. Stop may be called more than
// once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	var errs []error
	var clients, server, store []*process
	for _, p := range procs {
		switch p.name {
		case etcdName:
			store = append(store, p)
		case apiserverName:
			server = append(server, p)
		default:
			clients = append(clients, p)
		}
	}
	for _, group := range [][]*process{clients, server, store} {
		var wg sync.WaitGroup
		errc := make(chan error, len(group))
		for _, p := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errc <- p.stop(stopGrace)
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 && c.Dir != "" {
		if err := os.Remove(filepath.Join(c.Dir, pidsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
