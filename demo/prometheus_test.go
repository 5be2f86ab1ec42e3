package demo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v2"
)

func TestEveryEvaluationDropsOnlyTheIntervals(t *testing.T) {
	type group struct {
		Name     string           `yaml:"name"`
		Interval string           `yaml:"interval"`
		Rules    []map[string]any `yaml:"rules"`
	}
	read := func(path string) []group {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var f struct {
			Groups []group `yaml:"groups"`
		}
		require.NoError(t, yaml.UnmarshalStrict(b, &f))
		return f.Groups
	}
	src := filepath.Join("..", "alerts", "prometheus_rules.yaml")
	dst := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, everyEvaluation(src, dst))

	want, got := read(src), read(dst)
	var slow int
	for i := range want {
		if want[i].Interval != "" {
			slow++
		}
		want[i].Interval = ""
	}
	// The 30-day ratios are the groups with their own interval: without
	// them this test would prove nothing.
	require.NotZero(t, slow)
	assert.Equal(t, want, got)
}

func TestEveryEvaluationRefusesWhatItCannotParse(t *testing.T) {
	src := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(src, []byte("gruops:\n  - name: a\n"), 0o644))
	err := everyEvaluation(src, filepath.Join(t.TempDir(), "out.yaml"))
	require.ErrorContains(t, err, src)
}
