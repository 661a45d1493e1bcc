//go:build linux

package e2erelease

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// What a container runtime and the kubelet give a container, played here
// without either (this machine has neither): the image's root filesystem,
// its entrypoint with the Pod's args and env, the Pod's user, a read-only
// root, /proc, /dev, the Pod's volumes and its ServiceAccount token mounted
// at /var/run/secrets/kubernetes.io/serviceaccount, the Pod's name as the
// hostname. The test binary re-executes itself (containerEnv) in a new
// mount and UTS namespace, where it mounts these, chroots into the root
// filesystem, drops to the user and execs the entrypoint: the host's
// /var/run is never written, and every mount goes with the process. Not
// played: the network namespace (the process shares the host's loopback,
// where the local API server listens), cgroup limits and seccomp.

// containerEnv names the spec file of the container to run.
const containerEnv = "KONTINUE_E2E_RELEASE_CONTAINER"

// serviceAccountDir is where the kubelet mounts the token, the cluster's
// CA and the namespace (rest.InClusterConfig reads them there).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// containerSpec is one container to run.
type containerSpec struct {
	Rootfs       string   // the image's layers, extracted (mount points made)
	Hostname     string   // the Pod's name
	Args         []string // entrypoint and args, resolved as a runtime does
	Env          []string
	WorkingDir   string
	UID, GID     int
	ReadOnlyRoot bool
	NoNewPrivs   bool
	// Tmpfs are emptyDir volumes: mount path → size in bytes (0: none).
	Tmpfs map[string]int64
	// Secrets is a host folder mounted read-only at serviceAccountDir.
	Secrets string
}

// command is the process that runs spec: this test binary as the
// container's init, which then becomes the entrypoint (same PID).
func (spec containerSpec) command(dir string) (*exec.Cmd, error) {
	for _, p := range append([]string{"proc", "dev", serviceAccountDir}, keys(spec.Tmpfs)...) {
		if err := os.MkdirAll(filepath.Join(spec.Rootfs, p), 0o755); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "container.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{containerEnv + "=" + path}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A private mount table (Go also makes / private in it, so no
		// mount propagates back) and a hostname of its own.
		Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS,
		Pdeathsig:    syscall.SIGKILL,
	}
	return cmd, nil
}

func keys(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// runContainer is the container's init: in the new namespaces, it mounts
// what the runtime and the kubelet would, then becomes the entrypoint. It
// returns only on failure.
func runContainer(specPath string) error {
	runtime.LockOSThread()
	b, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec containerSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	root := spec.Rootfs
	in := func(p string) string { return filepath.Join(root, p) }
	mounts := []struct {
		source, target, fstype string
		flags                  uintptr
		data                   string
	}{
		// The root a mount of its own, so that it can be made read-only.
		{root, root, "", unix.MS_BIND | unix.MS_REC, ""},
		{"proc", in("proc"), "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"/dev", in("dev"), "", unix.MS_BIND | unix.MS_REC, ""},
		{spec.Secrets, in(serviceAccountDir), "", unix.MS_BIND, ""},
		{"", in(serviceAccountDir), "", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY, ""},
	}
	for _, m := range mounts {
		if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.source, m.target, err)
		}
	}
	for p, size := range spec.Tmpfs {
		data := "mode=1777"
		if size > 0 {
			data += fmt.Sprintf(",size=%d", size)
		}
		if err := unix.Mount("tmpfs", in(p), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
			return fmt.Errorf("emptyDir %s: %w", p, err)
		}
	}
	if spec.ReadOnlyRoot {
		if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only root: %w", err)
		}
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	wd := spec.WorkingDir
	if wd == "" {
		wd = "/"
	}
	if err := unix.Chdir(wd); err != nil {
		return fmt.Errorf("working dir: %w", err)
	}
	if spec.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	// Groups, group, then user: root's capabilities go with the last.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(spec.GID); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(spec.UID); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	// A change of user clears the parent-death signal: set it again, so
	// that the container dies with the test.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("pdeathsig: %w", err)
	}
	return syscall.Exec(spec.Args[0], spec.Args, spec.Env)
}
