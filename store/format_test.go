package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReportedFormats holds the formats `podslo version` reports to what
// the codec does: every format from OldestFormat to NewestFormat has golden
// records that decode, the next one is refused, and every record this
// release writes is in WriteFormat.
func TestReportedFormats(t *testing.T) {
	require.LessOrEqual(t, OldestFormat, WriteFormat)
	require.LessOrEqual(t, WriteFormat, NewestFormat)
	for f := OldestFormat; f <= NewestFormat; f++ {
		dir := fmt.Sprintf("format%d", f)
		_, err := os.Stat(filepath.Join("testdata", "golden", dir))
		require.NoError(t, err, "golden records of format %d, which this release says it reads", f)
		for name := range goldenStates {
			b := golden(t, dir, name)
			require.Equal(t, byte(f), b[0], "%s/%s", dir, name)
			_, err := decodeState(b)
			assert.NoError(t, err, "%s/%s", dir, name)
		}
		for name := range goldenAggregates {
			_, err := decodeAggregate(golden(t, dir, name), v1Bounds, testLayouts)
			assert.NoError(t, err, "%s/%s", dir, name)
		}
	}
	_, err := decodeState(reseal(append([]byte{NewestFormat + 1}, encodeState(fullState())[1:]...)))
	assert.ErrorIs(t, err, ErrNewerFormat, "a format after NewestFormat")

	for what, b := range map[string][]byte{
		"pod":       encodeState(fullState()),
		"aggregate": encodeAggregate(&Aggregate{Created: 1700000100, Histogram: goldenHistogram()}, layoutID(v1Bounds)),
		"counter":   encodeAggregate(&Aggregate{Created: 1700000000, Value: 42}, 0),
		"layout":    encodeLayout(v1Bounds),
	} {
		assert.Equal(t, byte(WriteFormat), b[0], "the format of a %s record this release writes", what)
	}
}
