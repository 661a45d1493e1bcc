package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
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
