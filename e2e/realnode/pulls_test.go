package realnode_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// withImage runs the pod's container from image, pulled by policy.
func withImage(image string, policy corev1.PullPolicy) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = image
		p.Spec.Containers[0].ImagePullPolicy = policy
	}
}

// includingWaiting and imageSize are the test's own reading of a Pulled
// message.
var (
	includingWaiting = regexp.MustCompile(` \((\S+) including waiting\)`)
	imageSize        = regexp.MustCompile(`\. Image size: (\d+) bytes\.$`)
)

// kubeletPulls is what the kubelet's Pulled events on a pod say of its
// image: the pull including its wait in seconds and the image's size in
// bytes (0 for an image already present), and whether there was one.
func kubeletPulls(t require.TestingT, s *suite, uid types.UID) (seconds float64, size uint64, cached, ok bool) {
	evs, err := s.node.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Pulled,involvedObject.uid=" + string(uid)})
	require.NoError(t, err)
	for _, ev := range evs.Items {
		if strings.Contains(ev.Message, "already present on machine") {
			return 0, 0, true, true
		}
		m := includingWaiting.FindStringSubmatch(ev.Message)
		require.NotNil(t, m, "a Pulled message without its duration: %q", ev.Message)
		d, err := time.ParseDuration(m[1])
		require.NoError(t, err)
		m = imageSize.FindStringSubmatch(ev.Message)
		require.NotNil(t, m, "a Pulled message of kubelet 1.36 without the image size: %q", ev.Message)
		size, err := strconv.ParseUint(m[1], 10, 64)
		require.NoError(t, err)
		return d.Seconds(), size, false, true
	}
	return 0, 0, false, false
}

// TestImagePullsOnARealNode lets the kubelet pull from a registry on
// loopback with imagePullPolicy Always and IfNotPresent, and from a
// missing repository: podslo's pulls are the kubelet's Pulled durations,
// pod by pod, a present image is a cache hit, the missing one a failed
// pull; and podslo's start-up SLI counts the pods the kubelet's
// kubelet_pod_start_sli_duration_seconds counts, with the same sum within
// the precision of the ends.
func TestImagePullsOnARealNode(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	reg := s.node.StartRegistry(t, "podslo/sleeper:1")
	image := reg.Image("podslo/sleeper:1")
	url := s.startExporter(t.TempDir())
	startsBefore, startSumBefore := kubeletHistogramSum(t, s.node, "kubelet_pod_start_sli_duration_seconds", "", "")

	// The first pull brings the image; IfNotPresent then finds it, and
	// Always pulls it again (its layers are there: a fast pull).
	pulled := s.createPod("pull-always", withImage(image, corev1.PullAlways))
	s.waitRunning(pulled.UID)
	present := s.createPod("pull-present", withImage(image, corev1.PullIfNotPresent))
	again := s.createPod("pull-again", withImage(image, corev1.PullAlways))
	missing := s.createPod("pull-missing", withImage(reg.Image("podslo/missing:1"), corev1.PullAlways))
	s.waitRunning(present.UID, again.UID)
	require.Eventually(t, func() bool {
		evs, err := s.node.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Failed,involvedObject.uid=" + string(missing.UID)})
		return err == nil && len(evs.Items) > 0
	}, 2*time.Minute, 100*time.Millisecond, "the kubelet never failed to pull the missing image")

	running := map[string]types.UID{"pull-always": pulled.UID, "pull-present": present.UID, "pull-again": again.UID}
	want := map[string]float64{}
	wantSize := map[string]float64{}
	cache := map[string]float64{}
	for name, uid := range running {
		var sec float64
		var size uint64
		var cached, ok bool
		require.Eventually(t, func() bool {
			sec, size, cached, ok = kubeletPulls(t, s, uid)
			return ok
		}, time.Minute, 100*time.Millisecond, "no Pulled event for %s", name)
		want[name] = sec
		// docs/metrics.md: rounded up to a KiB.
		wantSize[name] = float64((size + 1023) / 1024 * 1024)
		if cached {
			cache["hit"]++
		} else {
			cache["miss"]++
		}
		t.Logf("%s: the kubelet's Pulled event says %.3f s, %d bytes (cached %v)", name, sec, size, cached)
	}
	require.Equal(t, map[string]float64{"hit": 1, "miss": 2}, cache, "IfNotPresent finds the image, Always pulls it")

	var startups uint64
	var startupSum float64
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		got := perPod(fams["podslo_pod_image_pull_seconds"])
		for name, w := range want {
			assert.InDelta(ct, w, got[name], 1e-9, "%s: podslo's pull is the kubelet's Pulled duration", name)
		}
		assert.NotContains(ct, got, "pull-missing")
		assert.Equal(ct, wantSize, perPod(fams["podslo_pod_image_pull_size_bytes"]), "the images' sizes of the kubelet's Pulled events")
		count, _ := histogramBy(fams["podslo_image_pull_duration_seconds"], "cache")
		assert.Equal(ct, map[string]uint64{"hit": 1, "miss": 2}, count)
		assert.Equal(ct, float64(1), counterTotal(fams["podslo_image_pulls_failed_total"]), "the missing image, once")
		startups, startupSum = histogramTotal(fams["podslo_startup_sli_duration_seconds"])
		assert.Equal(ct, uint64(len(running)), startups)
		precision := counterBy(fams["podslo_observations_total"], "sli", "precision")
		assert.Equal(ct, float64(len(running)), precision["pod_startup,millisecond"], "every end timed by the watch")
		assert.Equal(ct, float64(len(running)), precision["image_pull,millisecond"])
	}, time.Minute, 100*time.Millisecond, "podslo's pulls and start-ups")

	// Beside the kubelet's own SLI, on the same pods: the same start
	// (creationTimestamp, whole seconds), the same pulls (its span from
	// Pulling to Pulled is the message's "including waiting", truncated to
	// the millisecond), and ends that are two watches' receive times of the
	// same update. They agree within msTolerance a pod.
	// Beside the kubelet's own SLI, on the same pods. Both start at
	// creationTimestamp (whole seconds) and take off the same pulls (the
	// kubelet's span from Pulling to Pulled is the message's "including
	// waiting", truncated to the millisecond). The ends differ: podslo's is
	// its watch's receive time of the update that shows every container
	// running; the kubelet's is when its own pod watch hands it that update
	// (watchObservedRunningTime), after its config and sync loops. The
	// kubelet also logs when its status manager saw the containers running
	// (observedRunningTime), just before it writes that update: podslo's
	// end is that time plus the API server's and its watch's delay.
	var kubelet map[string]kubeletStartup
	require.Eventually(t, func() bool {
		starts, _ := kubeletHistogramSum(t, s.node, "kubelet_pod_start_sli_duration_seconds", "", "")
		kubelet = kubeletStartups(t, s)
		return starts-startsBefore == startups && len(kubelet) == len(running)
	}, 30*time.Second, 100*time.Millisecond, "the kubelet counts the pods podslo counts")
	starts, startSum := kubeletHistogramSum(t, s.node, "kubelet_pod_start_sli_duration_seconds", "", "")
	assert.Equal(t, startups, starts-startsBefore, "podslo counts the pods the kubelet counts")
	got := perPod(scrape(t, url)["podslo_pod_startup_sli_seconds"])
	var watchDelay float64
	for name := range running {
		k := kubelet[name]
		atStatus := k.observed.Sub(k.created).Seconds() - k.pulls.Seconds()
		delay := k.watchObserved.Sub(k.observed).Seconds()
		watchDelay += delay
		t.Logf("%s: podslo %.3f s; the kubelet's SLI %.3f s, at its status manager %.3f s, its own watch %.1f ms later", name, got[name], k.sli, atStatus, 1000*delay)
		assert.InDelta(t, atStatus, got[name], msTolerance, "%s: podslo's end is the kubelet's status write, seen through the API", name)
		assert.LessOrEqual(t, got[name], k.sli+msTolerance, "%s: podslo's watch sees the update no later than the kubelet's", name)
	}
	kubeletSum := startSum - startSumBefore
	t.Logf("pod start-up SLI over %d pods: podslo %.3f s, the kubelet %.3f s: %.1f ms apart, of which the kubelet's own watch delay %.1f ms",
		startups, startupSum, kubeletSum, 1000*(kubeletSum-startupSum), 1000*watchDelay)
	assert.InDelta(t, kubeletSum-watchDelay, startupSum, msTolerance*float64(startups), "podslo's sum is the kubelet's, less its own watch delay")
}

// kubeletStartup is the kubelet's log line of one pod's start-up SLI.
type kubeletStartup struct {
	sli                              float64
	pulls                            time.Duration
	created, observed, watchObserved time.Time
	// initRuntime is the run time of the pod's init containers but
	// native sidecars that the kubelet took off (1.36 on, and the 1.34
	// and 1.35 patch releases with kubernetes#131950; hasInit says
	// whether its log says); stateful whether it left the pod out of its
	// SLI histogram as stateful (the same releases; false before).
	initRuntime time.Duration
	hasInit     bool
	stateful    bool
}

// The kubelet's log line of a pod's start-up SLI. From 1.36 it logs the
// pulls it took off (totalImagesPullingTime, the union of the pull
// sessions); before, it took off the span from the first pull's start to
// the last one's end, and logs those two times (firstStartedPulling,
// lastFinishedPulling; the zero time when nothing was pulled).
var (
	kubeletStartupLine = regexp.MustCompile(`"Observed pod startup duration" pod="` + ns + `/([^"]+)" podStartSLOduration=(\S+) .*podCreationTimestamp="([^"]+)" .*observedRunningTime="([^"]+?)(?: m=\S+)?" watchObservedRunningTime="([^"]+?)(?: m=\S+)?"`)
	kubeletPullsTotal  = regexp.MustCompile(` totalImagesPullingTime="([^"]+)"`)
	kubeletInitRuntime = regexp.MustCompile(` totalInitContainerRuntime="([^"]+)"`)
	kubeletStateful    = regexp.MustCompile(` isStatefulPod=true`)
	kubeletPullsSpan   = regexp.MustCompile(` firstStartedPulling="([^"]+?)(?: m=\S+)?" lastFinishedPulling="([^"]+?)(?: m=\S+)?"`)
)

const kubeletTime = "2006-01-02 15:04:05.999999999 -0700 MST"

// kubeletStartups reads the kubelet's start-up SLI of each pod from its
// log.
func kubeletStartups(t require.TestingT, s *suite) map[string]kubeletStartup {
	raw, err := os.ReadFile(filepath.Join(s.node.Dir(), "kubelet.log"))
	require.NoError(t, err)
	out := map[string]kubeletStartup{}
	for _, l := range strings.Split(string(raw), "\n") {
		m := kubeletStartupLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var k kubeletStartup
		k.sli, err = strconv.ParseFloat(m[2], 64)
		require.NoError(t, err, l)
		for i, at := range []*time.Time{&k.created, &k.observed, &k.watchObserved} {
			*at, err = time.Parse(kubeletTime, m[3+i])
			require.NoError(t, err, l)
		}
		if p := kubeletPullsTotal.FindStringSubmatch(l); p != nil {
			k.pulls, err = time.ParseDuration(p[1])
			require.NoError(t, err, l)
		} else if p := kubeletPullsSpan.FindStringSubmatch(l); p != nil {
			var first, last time.Time
			first, err = time.Parse(kubeletTime, p[1])
			require.NoError(t, err, l)
			last, err = time.Parse(kubeletTime, p[2])
			require.NoError(t, err, l)
			k.pulls = last.Sub(first)
		} else {
			require.Fail(t, "the kubelet's start-up line says nothing of its pulls", l)
		}
		if p := kubeletInitRuntime.FindStringSubmatch(l); p != nil {
			k.initRuntime, err = time.ParseDuration(p[1])
			require.NoError(t, err, l)
			k.hasInit = true
		}
		k.stateful = kubeletStateful.MatchString(l)
		out[m[1]] = k
	}
	return out
}
