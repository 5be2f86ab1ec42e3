package cmd

import (
	"bytes"
	"context"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/common/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/store"
)

func stampVersion(t *testing.T) {
	t.Helper()
	saved := [...]string{version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate}
	t.Cleanup(func() {
		version.Version, version.Revision, version.Branch, version.BuildUser, version.BuildDate = saved[0], saved[1], saved[2], saved[3], saved[4]
	})
	version.Version, version.Revision, version.Branch = "0.2.0", "0123abcd-dirty", "main"
	version.BuildUser, version.BuildDate = "builder@host", "2026-01-02T03:04:05Z"
}

// TestVersion: `podslo version` and `podslo --version` print what the
// release build stamped into prometheus/common/version, and the state
// formats the store reads and writes.
func TestVersion(t *testing.T) {
	stampVersion(t)
	want := "podslo, version 0.2.0 (branch: main, revision: 0123abcd-dirty)\n" +
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
			assert.Regexp(t, `^\Q`+want+`\E  tags:             \S+\n  build:            full \(exporter, agent, demo\)\n  state formats:    reads \d+ to \d+, writes \d+\n$`, out.String())
			m := formatsLine.FindStringSubmatch(out.String())
			require.NotNil(t, m, out.String())
			assert.Equal(t, []string{strconv.Itoa(store.OldestFormat), strconv.Itoa(store.NewestFormat), strconv.Itoa(store.WriteFormat)}, m[1:],
				"the formats printed are the store's")
		})
	}
}

var formatsLine = regexp.MustCompile(`(?m)^  state formats:    reads (\d+) to (\d+), writes (\d+)$`)

func TestVersionTakesNoArguments(t *testing.T) {
	root := NewRoot(&bytes.Buffer{})
	root.SetArgs([]string{"version", "extra"})
	root.SetOut(&bytes.Buffer{})
	assert.ErrorContains(t, root.ExecuteContext(context.Background()), `unknown command "extra"`)
}
