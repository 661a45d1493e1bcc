package version

import (
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNextIsAVersion(t *testing.T) {
	require.Regexp(t, regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`), Next())
	require.Equal(t, Next()+"-dev", Version, "a test binary stamps nothing")
}

func TestDescribe(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		version string
		info    *debug.BuildInfo
		want    string
	}{
		{"v0.1.0", vcs("vcs.revision", rev), "kontinue v0.1.0"}, // a release names no commit
		{"v0.1.0-dev", vcs("vcs.revision", rev, "vcs.modified", "false"), "kontinue v0.1.0-dev (commit 0123456789ab)"},
		{"v0.1.0-dev", vcs("vcs.revision", rev, "vcs.modified", "true"), "kontinue v0.1.0-dev (commit 0123456789ab, modified)"},
		{"v0.1.0-dev", vcs(), "kontinue v0.1.0-dev"}, // go test, or a build outside git
		{"v0.1.0-dev", nil, "kontinue v0.1.0-dev"},
	} {
		require.Equal(t, tc.want, describe(tc.version, tc.info))
	}
}
