package robustness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"kontinue.dev/kontinue/e2e/robustness/check"
)

// Faults: a replica killed with SIGKILL (and started again), the leader of
// the default shard killed (a failover), the API server down, slow
// answers, 429s. Each runs in the background for its length; the traffic
// goes on meanwhile. Each leaves an outage in the history: the interval in
// which Kontinue cannot be expected to act, widened by catchUp.

// catchUp is how long a fresh replica (or one after an outage) is given
// to catch up before invariant 7 counts again: a start, its caches'
// first lists, the reconciles of every owner it serves.
const catchUp = 20 * time.Second

func msArg(o Op, key string) time.Duration {
	n, _ := strconv.Atoi(o.Args[key])
	return time.Duration(n) * time.Millisecond
}

func (r *run) fault(o Op) error {
	start := time.Now()
	switch o.Do {
	case "kill":
		rep := r.replicas[o.Args["replica"]]
		if rep == nil {
			return fmt.Errorf("no replica %q", o.Args["replica"])
		}
		rep.kill()
		r.background(func() {
			time.Sleep(msArg(o, "restartAfter"))
			r.restart(rep, start)
		})
	case "failover":
		var leader *replica
		for _, name := range []string{"r1", "r2"} {
			if rep := r.replicas[name]; rep.running() && rep.leading() {
				leader = rep
			}
		}
		if leader == nil {
			return fmt.Errorf("no leader of the default shard to kill")
		}
		r.logf("failover: killing the leader %s", leader.name)
		leader.kill()
		r.background(func() {
			time.Sleep(msArg(o, "restartAfter"))
			r.restart(leader, start)
		})
	case "outage":
		r.mu.Lock()
		r.stops = append(r.stops, time.Now()) // before the kill: a write lost at it is after this
		r.mu.Unlock()
		if err := r.cluster.StopAPIServer(); err != nil {
			return err
		}
		r.background(func() {
			time.Sleep(msArg(o, "for"))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := r.cluster.StartAPIServer(ctx); err != nil {
				r.logf("FAULT: the API server did not come back: %v", err)
			}
			r.outage(start, time.Now().Add(catchUp), "API server outage")
		})
	case "slow", "throttle":
		frac, _ := strconv.ParseFloat(o.Args["fraction"], 64)
		r.proxy.set(msArg(o, "latency"), frac)
		r.background(func() {
			time.Sleep(msArg(o, "for"))
			r.proxy.set(0, 0)
			r.mark("", "end of "+o.Do)
			r.outage(start, time.Now().Add(catchUp/2), o.Do)
		})
	}
	return nil
}

// restart starts a killed replica again and records the outage.
func (r *run) restart(rep *replica, since time.Time) {
	if err := rep.start(); err != nil {
		r.logf("FAULT: replica %s did not start: %v", rep.name, err)
	}
	r.mark("", "replica "+rep.name+" started")
	r.outage(since, time.Now().Add(catchUp), "replica "+rep.name+" killed")
}

func (r *run) outage(from, to time.Time, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outages = append(r.outages, check.Interval{From: from, To: to})
	r.logf("outage %s: %s – %s", what, from.Format("15:04:05.000"), to.Format("15:04:05.000"))
}

// background runs a fault's tail; endFaults waits for them.
func (r *run) background(f func()) {
	r.faults.Add(1)
	go func() {
		defer r.faults.Done()
		f()
	}()
}

// endFaults waits for the faults under way and makes sure everything runs:
// the API server, every replica, a proxy that injects nothing.
func (r *run) endFaults(ctx context.Context) error {
	r.faults.Wait()
	r.proxy.set(0, 0)
	if err := r.cluster.Ready(ctx); err != nil {
		if err := r.cluster.StartAPIServer(ctx); err != nil {
			return err
		}
	}
	for _, rep := range r.replicas {
		if !rep.running() {
			if err := rep.start(); err != nil {
				return err
			}
		}
	}
	return nil
}
