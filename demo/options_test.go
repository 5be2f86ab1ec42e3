package demo

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{name: "defaults", opts: Options{SourceDir: ".."}},
		{
			name: "not the source tree",
			opts: Options{SourceDir: "."},
			want: `--source-dir "." is not podslo's source tree: stat deploy/kwok/pod-stages.yaml: no such file or directory`,
		},
		{
			name: "too many nodes",
			opts: Options{SourceDir: "..", Nodes: 101},
			want: "--nodes must be between 1 and 100, got 101",
		},
		{
			name: "beyond loopback",
			opts: Options{SourceDir: "..", ListenAddress: ":8080"},
			want: `--listen-address ":8080": a demo listens on loopback addresses (127.0.0.0/8) only`,
		},
		{
			name: "a bad workload",
			opts: Options{SourceDir: "..", Workload: &Workload{Groups: []Group{
				{Name: "web", RuntimeClass: "gvisor"}, {Name: "web", Replicas: -1},
			}}},
			want: `workload: group "web": runtime class "gvisor" is none of runc, kata (deploy/kwok/classes.yaml)` + "\n" +
				`workload: group "web" twice` + "\n" +
				`workload: group "web": negative replicas`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.want)
		})
	}
}

func TestModuleVersion(t *testing.T) {
	v, err := moduleVersion("../hack/tools/go.mod", "k8s.io/kubernetes")
	assert.NoError(t, err)
	assert.Regexp(t, `^v1\.\d+\.\d+$`, v)
	v, err = moduleVersion("../hack/kwok/go.mod", "sigs.k8s.io/kwok")
	assert.NoError(t, err)
	assert.Equal(t, "v0.8.0", v)
	_, err = moduleVersion("../go.mod", "k8s.io/kubernetes")
	assert.EqualError(t, err, "../go.mod does not require k8s.io/kubernetes")
}

// TestProgressOffTerminal: off a terminal the bar prints a line per tenth,
// never more, and always ends at 100%.
func TestProgressOffTerminal(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "building etcd", 40)
	for range 45 {
		p.add(1)
	}
	p.finish()
	assert.Equal(t, "building etcd: 0% (0/40)\n"+
		"building etcd: 10% (4/40)\nbuilding etcd: 20% (8/40)\nbuilding etcd: 30% (12/40)\nbuilding etcd: 40% (16/40)\n"+
		"building etcd: 50% (20/40)\nbuilding etcd: 60% (24/40)\nbuilding etcd: 70% (28/40)\nbuilding etcd: 80% (32/40)\n"+
		"building etcd: 90% (36/40)\nbuilding etcd: 100% (40/40)\n", out.String())
}

// TestReapStale: a demo directory whose owner died is removed, one whose
// owner lives is left alone.
func TestReapStale(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	for name, pid := range map[string]int{"podslo-demo-dead": dead.Process.Pid, "podslo-demo-live": os.Getpid()} {
		require.NoError(t, os.MkdirAll(filepath.Join(tmp, name, "clusters"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name, ownerFile), []byte(strconv.Itoa(pid)), 0o644))
	}
	d := &Demo{opts: Options{KwokBinDir: filepath.Join(tmp, "no-kwok")}}
	d.reapStale(slog.New(slog.DiscardHandler))
	left, err := filepath.Glob(filepath.Join(tmp, "podslo-demo-*"))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(tmp, "podslo-demo-live")}, left)
}

// TestBuild builds one real binary as a first run does, through the
// progress bar, into a fresh directory.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("links etcd")
	}
	var out bytes.Buffer
	d := &Demo{opts: Options{SourceDir: "..", Out: &out}}
	bin := filepath.Join(t.TempDir(), "etcd")
	require.NoError(t, d.buildBinary(t.Context(), binaries[0], bin))
	info, err := os.Stat(bin)
	require.NoError(t, err)
	assert.NotZero(t, info.Mode()&0o100, "executable")
	// From 0% to 100% of the packages go list counted.
	m := regexp.MustCompile(`^building etcd: 0% \(0/(\d+)\)\n`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	assert.True(t, strings.HasSuffix(out.String(), "building etcd: 100% ("+m[1]+"/"+m[1]+")\n"), out.String())
	_, err = os.Stat(bin + ".tmp")
	assert.True(t, os.IsNotExist(err), "no temporary binary left")
}

// TestBuildStampsKubernetes: a control-plane binary the demo builds says
// the version hack/tools pins, as the Makefile's do; unstamped it says
// v0.0.0-master, and the Makefile, which shares the cache, links it again.
func TestBuildStampsKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("links kube-scheduler")
	}
	var scheduler binary
	for _, b := range binaries {
		if b.name == "kube-scheduler" {
			scheduler = b
		}
	}
	require.True(t, scheduler.kubernetes, "kube-scheduler is stamped")
	d := &Demo{opts: Options{SourceDir: "..", Out: io.Discard}}
	bin := filepath.Join(t.TempDir(), "kube-scheduler")
	require.NoError(t, d.buildBinary(t.Context(), scheduler, bin))
	want, err := moduleVersion(filepath.Join("..", "hack", "tools", "go.mod"), "k8s.io/kubernetes")
	require.NoError(t, err)
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "Kubernetes "+want, strings.TrimSpace(string(out)))
}
