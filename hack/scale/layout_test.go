package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAPIServerMetrics(t *testing.T) {
	body := []byte(`# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="CONNECT",version="v1"} 7
apiserver_longrunning_requests{component="apiserver",group="storage.k8s.io",resource="storageclasses",scope="cluster",subresource="",verb="WATCH",version="v1"} 1
process_cpu_seconds_total 12.5
process_resident_memory_bytes 1.048576e+06
`)
	s, err := parseAPIServerMetrics(body)
	require.NoError(t, err)
	assert.Equal(t, APIServerSample{Watches: map[string]int{"pods": 5, "storageclasses": 1}, CPUSeconds: 12.5, RSSBytes: 1 << 20}, s)

	_, err = parseAPIServerMetrics([]byte("up 1\n"))
	assert.ErrorContains(t, err, "process_cpu_seconds_total")
}

func TestLayoutOptions(t *testing.T) {
	o, err := parseOptions([]string{"--layout", "shards"})
	require.NoError(t, err)
	assert.Equal(t, "results/layout-shards.json", o.Out)
	assert.Equal(t, "results/layout-shards.md", o.Markdown)
	assert.Equal(t, 4, o.Shards)

	_, err = parseOptions([]string{"--layout", "shards", "--ksm", "/bin/ksm"})
	assert.ErrorContains(t, err, "leave out --ksm")

	o, err = parseOptions([]string{"--layout", "sharded", "--ksm", ""})
	require.NoError(t, err)
	assert.ErrorContains(t, o.Validate(), `--layout "sharded"`)

	o, err = parseOptions([]string{"--ksm", ""})
	require.NoError(t, err)
	assert.Equal(t, "results/results.json", o.Out)
	assert.Equal(t, "results/results.md", o.Markdown)
}
