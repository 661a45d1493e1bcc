package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the executables expected in Options.BinDir.
var Binaries = []string{etcdName, apiserverName, kcmName}

// HaveBinaries returns nil when dir holds the three executables.
func HaveBinaries(dir string) error {
	var missing []string
	for _, name := range Binaries {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: missing %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// Versions are the versions pinned by hack/install-controlplane.sh.
type Versions struct {
	Kubernetes string // e.g. v1.32.5
	Etcd       string // e.g. v3.5.16
}

// installScript is relative to the repository root.
const installScript = "hack/install-controlplane.sh"

// PinnedVersions reads the versions from hack/install-controlplane.sh, so
// that they are written down in one place only.
func PinnedVersions(repoRoot string) (Versions, error) {
	path := filepath.Join(repoRoot, installScript)
	f, err := os.Open(path)
	if err != nil {
		return Versions{}, err
	}
	defer f.Close()
	var v Versions
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if s, ok := strings.CutPrefix(line, "K8S_VERSION="); ok {
			v.Kubernetes = strings.Trim(s, `"'`)
		}
		if s, ok := strings.CutPrefix(line, "ETCD_VERSION="); ok {
			v.Etcd = strings.Trim(s, `"'`)
		}
	}
	if err := sc.Err(); err != nil {
		return v, err
	}
	if v.Kubernetes == "" || v.Etcd == "" {
		return v, fmt.Errorf("%s: K8S_VERSION= or ETCD_VERSION= not found", path)
	}
	return v, nil
}

// CachedBinDir returns the folder where hack/install-controlplane.sh puts
// the binaries (computed the same way as the script: $KONTINUE_CACHE, else
// $XDG_CACHE_HOME/kontinue, else ~/.cache/kontinue). The folder may not
// exist; see HaveBinaries.
func CachedBinDir(repoRoot string) (string, error) {
	v, err := PinnedVersions(repoRoot)
	if err != nil {
		return "", err
	}
	cache := os.Getenv("KONTINUE_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "kontinue")
	}
	return filepath.Join(cache, "k8s-"+v.Kubernetes+"-etcd-"+v.Etcd), nil
}

// RepoRoot walks up from dir to the folder whose go.mod declares module
// kontinue.dev/kontinue.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if strings.TrimSpace(line) == "module kontinue.dev/kontinue" {
					return d, nil
				}
			}
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the kontinue repository (no go.mod with module kontinue.dev/kontinue above " + dir + ")")
		}
	}
}

// Installed are the folders and executables the install scripts built.
type Installed struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler (Options.BinDir).
	BinDir string
	// Kwok is kwok's executable (Workloads.KwokBinary); set by Install
	// with real.
	Kwok string
	// TektonDir holds Tekton's controller and config (Tekton.Dir); set by
	// Install with real.
	TektonDir string
}

// Install runs hack/install-controlplane.sh and, with real, also
// hack/install-kwok.sh and hack/install-tekton.sh: each builds what is
// missing from the Go module proxy into the cache, once per version, and
// prints where it is. Their progress lines go to log (may be nil).
func Install(ctx context.Context, repoRoot string, real bool, log io.Writer) (Installed, error) {
	var in Installed
	type script struct {
		name string
		out  *string
	}
	scripts := []script{{"install-controlplane.sh", &in.BinDir}}
	if real {
		scripts = append(scripts, script{"install-kwok.sh", &in.Kwok}, script{"install-tekton.sh", &in.TektonDir})
	}
	for _, s := range scripts {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", s.name))
		cmd.Stdout = &out
		cmd.Stderr = &errb
		if log != nil {
			cmd.Stderr = io.MultiWriter(&errb, log)
		}
		if err := cmd.Run(); err != nil {
			return in, fmt.Errorf("hack/%s: %v\n%s", s.name, err, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		*s.out = strings.TrimSpace(lines[len(lines)-1])
		if *s.out == "" {
			return in, fmt.Errorf("hack/%s printed no path", s.name)
		}
	}
	return in, nil
}
