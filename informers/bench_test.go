package informers

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/pipeline"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/store"
)

var benchNow = time.Unix(1700000100, 0)

// benchPod is a realistic full pod as the API server sends it: labels,
// annotations, managed fields, two containers, a few volumes, five
// conditions and container statuses, all of which the transform must trim.
func benchPod(i int) *corev1.Pod {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	ready := metav1.NewTime(time.Unix(1700000003, 0))
	name := fmt.Sprintf("web-7d9f8b6c5d-%05d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team-payments", UID: types.UID(uuid.NewString()), ResourceVersion: fmt.Sprint(1000 + i),
			CreationTimestamp: at, GenerateName: "web-7d9f8b6c5d-",
			Labels:          map[string]string{"app.kubernetes.io/name": "web", "pod-template-hash": "7d9f8b6c5d", "team": "payments"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z", "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5d", UID: "rs"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update"}, {Manager: "kubelet", Operation: "Update", Subresource: "status"}},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("node-%03d", i%500), ServiceAccountName: "web",
			Containers: []corev1.Container{
				{Name: "web", Image: "registry.example.com/web:1.2.3", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}, Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}},
				{Name: "sidecar", Image: "registry.example.com/proxy:4.5.6"},
			},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.1.2.3", HostIP: "10.0.0.1", QOSClass: corev1.PodQOSBurstable, StartTime: &at,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "web", Ready: true, Image: "registry.example.com/web:1.2.3", ImageID: "sha256:abc", ContainerID: "containerd://abc", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ready}}},
				{Name: "sidecar", Ready: true, Image: "registry.example.com/proxy:4.5.6", ImageID: "sha256:def", ContainerID: "containerd://def", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ready}}},
			},
		},
	}
}

// benchWatcher is a watch handing pods to a pipeline over st, as in the
// exporter.
func benchWatcher(b testing.TB, st *store.Store) (*Watcher, *pipeline.Pipeline) {
	b.Helper()
	p, err := pipeline.New(st, pipeline.Options{
		PodLabels: []string{"app.kubernetes.io/name"},
		Scope:     scope.Unscoped,
		Now:       func() time.Time { return benchNow },
	})
	if err != nil {
		b.Fatal(err)
	}
	w, err := New(kubetest.Wrap(fake.NewClientset()), p, Options{PodLabels: []string{"app.kubernetes.io/name"}})
	if err != nil {
		b.Fatal(err)
	}
	w.classes = *resolver(b)
	return w, p
}

// delivered is full as the watch hands it on: trimmed, classes resolved.
func (w *Watcher) delivered(full *corev1.Pod) *lifecycle.Pod {
	t, _ := w.trim.transform(full)
	pod := t.(*lifecycle.Pod)
	pod.RuntimeClass = RuntimeClass(pod)
	pod.StorageClass = w.classes.StorageClass(pod)
	return pod
}

func openBench(b testing.TB, dir string) *store.Store {
	b.Helper()
	st, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// BenchmarkHandleNoChange is the common case: an update (a resync, a
// status heartbeat) that changes no SLI state and must write nothing.
func BenchmarkHandleNoChange(b *testing.B) {
	st := openBench(b, b.TempDir())
	w, p := benchWatcher(b, st)
	pod := w.delivered(benchPod(0))
	if err := p.Handle(pod); err != nil {
		b.Fatal(err)
	}
	applies := st.Stats().Succeeded(store.OpApply)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := p.Handle(pod); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st.Stats().Succeeded(store.OpApply) != applies {
		b.Fatal("a no-change update wrote to the store")
	}
}

// atStage cuts a full pod back to an earlier stage of its start-up:
// "scheduled", "sandbox" (sandbox ready, containers not started) or
// "ready" (everything).
func atStage(p *corev1.Pod, stage string) *corev1.Pod {
	p = p.DeepCopy()
	keep := map[corev1.PodConditionType]bool{corev1.PodScheduled: true}
	switch stage {
	case "scheduled":
	case "sandbox":
		keep[corev1.PodReadyToStartContainers] = true
		keep[corev1.PodInitialized] = true
	case "ready":
		return p
	}
	var conds []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if keep[c.Type] {
			conds = append(conds, c)
		}
	}
	p.Status.Conditions = conds
	p.Status.ContainerStatuses = nil
	return p
}

// BenchmarkHandleTransition times one update that writes state, per
// start-up transition: the pod was handled at its previous stage outside
// the timer. "sandbox" is the first sandbox readiness (the creation
// histogram and the sandbox phase), "ready" the first Ready (readiness and
// three phases), "first-sight" a pod first seen fully started (seven
// histograms in one transaction).
func BenchmarkHandleTransition(b *testing.B) {
	for _, tc := range []struct{ name, from, to string }{
		{"sandbox", "scheduled", "sandbox"},
		{"ready", "sandbox", "ready"},
		{"first-sight", "", "ready"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st := openBench(b, b.TempDir())
			w, pl := benchWatcher(b, st)
			pods := make([]*lifecycle.Pod, b.N)
			for i := range pods {
				full := benchPod(i)
				if tc.from != "" {
					if err := pl.Handle(w.delivered(atStage(full, tc.from))); err != nil {
						b.Fatal(err)
					}
				}
				pods[i] = w.delivered(atStage(full, tc.to))
			}
			applies := st.Stats().Succeeded(store.OpApply)
			b.ReportAllocs()
			b.ResetTimer()
			for _, p := range pods {
				if err := pl.Handle(p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got := st.Stats().Succeeded(store.OpApply) - applies; got != uint64(b.N) {
				b.Fatalf("%d writes for %d transitions", got, b.N)
			}
		})
	}
}

// BenchmarkMemoryPerPod keeps n pods as the exporter does, through the pod
// watch's processing (the key and UID kept for relists) into the store, and
// reports the heap in use per
// pod (live objects and the free space of their spans, which a process
// keeps resident) and the bytes per pod of the state on disk after Close.
// The difference between two sizes is the marginal cost of a pod; the rest
// is badger's memtables and caches, which are bounded.
func BenchmarkMemoryPerPod(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for range b.N {
				dir := b.TempDir()
				st := openBench(b, dir)
				w, _ := benchWatcher(b, st)
				pw := newPodWatch("", nil)
				keys := pw.keys
				before := heapInUse()
				for i := range n {
					p, _ := w.trim.transform(benchPod(i))
					w.processPodDelta(pw, cache.Delta{Type: cache.Added, Object: p})
				}
				if n := st.Stats().Failed(store.OpApply); n > 0 {
					b.Fatalf("%d pod writes failed", n)
				}
				after := heapInUse()
				runtime.KeepAlive(keys)
				b.ReportMetric(float64(after-before)/float64(n), "heap-B/pod")
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(dirSize(b, dir))/float64(n), "disk-B/pod")
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func dirSize(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}
