package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// StopAPIServer stops kube-apiserver alone (SIGKILL: an abrupt outage, as
// a crashed or partitioned server), keeping etcd and the
// controller-manager. StartAPIServer brings it back on the same address
// with the same flags and data. Only a cluster started by this process (not
// an attached one) can do this.
func (c *Cluster) StopAPIServer() error {
	p, err := c.component(apiserverName)
	if err != nil {
		return err
	}
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid)
	}
}

// StartAPIServer restarts the kube-apiserver StopAPIServer stopped and
// waits until it is ready. Its previous log is kept with a ".1" suffix.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	old, err := c.component(apiserverName)
	if err != nil {
		return err
	}
	if !old.exited() {
		return errors.New("localcluster: kube-apiserver is running")
	}
	_ = os.Rename(old.logPath, old.logPath+".1")
	p, err := launch(old.name, old.path, old.args, old.env, old.dir, old.logPath, old.detach)
	if err != nil {
		return fmt.Errorf("localcluster: restart %s: %w", old.name, err)
	}
	c.mu.Lock()
	for i, q := range c.procs {
		if q == old {
			c.procs[i] = p
		}
	}
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	if err := writePids(c.Dir, procs); err != nil {
		return err
	}
	client, err := c.HTTPClient()
	if err != nil {
		return err
	}
	if err := waitReady(ctx, p, apiserverTimeout, func(ctx context.Context) error {
		return probe(ctx, client, c.Host+"/readyz", http.StatusOK)
	}); err != nil {
		return fmt.Errorf("localcluster: restart %s: %w\n--- last 20 lines of %s ---\n%s", p.name, err, p.logPath, tail(p.logPath, 20))
	}
	return nil
}

// component returns the process named name, started by this process.
func (c *Cluster) component(name string) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name {
			if p.cmd == nil {
				return nil, fmt.Errorf("localcluster: %s was not started by this process", name)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("localcluster: no %s", name)
}
