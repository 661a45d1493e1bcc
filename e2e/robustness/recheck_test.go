package robustness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kontinue.dev/kontinue/e2e/robustness/check"
)

// A kept run (its audit log, marks and the cluster read at its end) can be
// checked again without running it: after a change of the checks, or to
// look at one with a debugger.
//
//	go test ./e2e/robustness -run TestRecheck -args -robustness.recheck='_output/robustness/*'

type savedObject struct {
	Group    string          `json:"group"`
	Resource string          `json:"resource"`
	Object   json.RawMessage `json:"object"`
}

func saveSnapshot(path string, s *check.Snapshot) error {
	if s == nil {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "%s\n", s.At.Format(time.RFC3339Nano))
	for _, k := range s.Keys() {
		line, err := json.Marshal(savedObject{Group: k.Group, Resource: k.Resource, Object: s.Objects[k]})
		if err != nil {
			// Too deep for encoding/json: kept as text.
			line = []byte(fmt.Sprintf(`{"group":%q,"resource":%q,"object":%s}`, k.Group, k.Resource, s.Objects[k]))
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	return w.Flush()
}

func loadSnapshot(path string) (*check.Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	s := &check.Snapshot{}
	first := true
	for sc.Scan() {
		if first {
			first = false
			if s.At, err = time.Parse(time.RFC3339Nano, sc.Text()); err != nil {
				return nil, err
			}
			continue
		}
		line := sc.Bytes()
		// gjson-free and depth-free: the object is everything after the
		// two short fields.
		var head struct{ Group, Resource string }
		i := strings.Index(string(line), `"object":`)
		if i < 0 {
			continue
		}
		_ = json.Unmarshal(append(append([]byte{}, line[:i]...), []byte(`"x":0}`)...), &head)
		obj := line[i+len(`"object":`) : len(line)-1]
		s.Put(head.Group, head.Resource, append([]byte{}, obj...))
	}
	return s, sc.Err()
}

// loadMarks reads marks.txt: the marks, outages and the quiet window.
func loadMarks(path string) (marks []check.Mark, outages []check.Interval, stops []time.Time, quietFrom, end time.Time, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, time.Time{}, time.Time{}, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, " ", 4)
		switch f[0] {
		case "mark":
			at, _ := time.Parse(time.RFC3339Nano, f[1])
			scope, _ := strconv.Unquote(f[2])
			what := ""
			if len(f) > 3 {
				what = f[3]
			}
			marks = append(marks, check.Mark{At: at, Scope: scope, What: what})
		case "stop":
			at, _ := time.Parse(time.RFC3339Nano, f[1])
			stops = append(stops, at)
		case "outage", "quiet":
			a, _ := time.Parse(time.RFC3339Nano, f[1])
			b, _ := time.Parse(time.RFC3339Nano, f[2])
			if f[0] == "outage" {
				outages = append(outages, check.Interval{From: a, To: b})
			} else {
				quietFrom, end = a, b
			}
		}
	}
	return marks, outages, stops, quietFrom, end, nil
}

func TestRecheck(t *testing.T) {
	if *flagRecheck == "" {
		t.Skip("set -robustness.recheck to the folders of kept runs")
	}
	dirs, err := filepath.Glob(*flagRecheck)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "final.jsonl")); err != nil {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			parts := strings.SplitN(filepath.Base(dir), "-", 3)
			r := &run{prefix: parts[2], dir: dir}
			if b, err := os.ReadFile(filepath.Join(dir, "digests.json")); err == nil {
				if err := json.Unmarshal(b, &r.keptDigests); err != nil {
					t.Fatal(err)
				}
			}
			marks, outages, stops, quietFrom, end, err := loadMarks(filepath.Join(dir, "marks.txt"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(dir, "audit.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			evs, err := check.ReadAudit(f, r.inRun)
			if err != nil {
				t.Fatal(err)
			}
			final, err := loadSnapshot(filepath.Join(dir, "final.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			afterGC, _ := loadSnapshot(filepath.Join(dir, "aftergc.jsonl"))
			begin := end
			if len(evs) > 0 {
				begin = evs[0].Time
			}
			h := &check.History{Events: evs, Kontinue: kontinueUser, Begin: begin, End: end, Marks: marks, Outages: outages, Stops: stops}
			vs, notes := r.check(h, final, afterGC, quietFrom, nil, nil)
			t.Logf("%s", strings.Join(notes, "; "))
			if len(vs) > 0 {
				t.Errorf("%d violation(s):\n%s", len(vs), check.Summary(vs, 5))
			}
		})
	}
}
