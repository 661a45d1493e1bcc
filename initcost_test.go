package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInitCost bounds what initialising the packages Kontinue links
// allocates. Every process pays it before main: the controller, each CLI
// command and each renderer child (goTemplate, Helm and ytt run in
// children of this executable). The CDEvents SDK alone once allocated
// 33 MB there, compiling every schema of the spec (notify/cdevents.go).
// This test binary links what main links; it is run again with
// GODEBUG=inittrace=1, which reports each package's init allocations.
func TestInitCost(t *testing.T) {
	const bound = 16 << 20 // today about 8 MB
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	type pkg struct {
		name  string
		bytes int
	}
	var pkgs []pkg
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
	for sc.Scan() {
		// init <package> @<t> ms, <ms> ms clock, <bytes> bytes, <n> allocs
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		require.NoError(t, err, sc.Text())
		pkgs = append(pkgs, pkg{f[1], n})
		total += n
	}
	require.NotEmpty(t, pkgs, "no inittrace lines: %s", stderr.String())
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].bytes > pkgs[j].bytes })
	top := pkgs[:min(5, len(pkgs))]
	require.Less(t, total, bound, "package initialisation allocates %d bytes; the most: %v", total, top)
}
