package cmd

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/prometheus/common/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func stampVersion(t *testing.T) {
	t.Helper()
	saved := [...]string{version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate}
	t.Cleanup(func() {
		version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate = saved[0], saved[1], saved[2], saved[3], saved[4]
	})
	version.Version, version.Revision, version.Branch = "0.1.0", "0123abcd-dirty", "main"
	version.BuildUser, version.BuildDate = "builder@host", "2026-01-02T03:04:05Z"
}

// TestVersion: `podslo version` and `podslo --version` print what the
// release build stamped into prometheus/common/version.
func TestVersion(t *testing.T) {
	stampVersion(t)
	want := "podslo, version 0.1.0 (branch: main, revision: 0123abcd-dirty)\n" +
		"  build user:       builder@host\n" +
		"  build date:       2026-01-02T03:04:05Z\n" +
		"  go version:       " + runtime.Version() + "\n" +
		"  platform:         " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		t.Run(args[0], func(t *testing.T) {
			var out bytes.Buffer
			root := NewRoot(&bytes.Buffer{})
			root.SetArgs(args)
			root.SetOut(&out)
			require.NoError(t, root.ExecuteContext(context.Background()))
			assert.Regexp(t, `^\Q`+want+`\E  tags:             \S+\n$`, out.String())
		})
	}
}

func TestVersionTakesNoArguments(t *testing.T) {
	root := NewRoot(&bytes.Buffer{})
	root.SetArgs([]string{"version", "extra"})
	root.SetOut(&bytes.Buffer{})
	assert.ErrorContains(t, root.ExecuteContext(context.Background()), `unknown command "extra"`)
}
