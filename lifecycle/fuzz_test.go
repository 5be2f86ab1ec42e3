package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	fuzzTypes    = []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReadyToStartContainers, "PodHasNetwork", corev1.PodReady, corev1.PodInitialized, DefaultStableConditionType, "example.com/Other"}
	fuzzStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown, "Bogus", ""}
	fuzzBase     = time.Unix(1700000000, 0)
)

// fuzzReader turns fuzz bytes into pods: every byte is used, and running
// out of bytes reads zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// offset is a time within ±32767 s of the base; 0 means "unset".
func (r *fuzzReader) offset() int64 { return int64(int16(uint16(r.byte())<<8 | uint16(r.byte()))) }

func (r *fuzzReader) time() int64 {
	if o := r.offset(); o != 0 {
		return fuzzBase.Unix() + o
	}
	return 0
}

func (r *fuzzReader) pod() (time.Time, *Pod) {
	now := fuzzBase.Add(time.Duration(r.offset()) * time.Second)
	p := &Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
	if t := r.time(); t != 0 {
		p.CreationTimestamp = metav1.NewTime(time.Unix(t, 0))
	}
	for n := int(r.byte() % 6); n > 0; n-- {
		p.Conditions = append(p.Conditions, Condition{
			Type:               fuzzTypes[int(r.byte())%len(fuzzTypes)],
			Status:             fuzzStatuses[int(r.byte())%len(fuzzStatuses)],
			LastTransitionTime: r.time(),
		})
	}
	flags := r.byte()
	p.HasInitContainers = flags&1 != 0
	if flags&2 != 0 {
		dt := metav1.NewTime(time.Unix(fuzzBase.Unix()+r.offset(), 0))
		grace := int64(r.byte())
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &dt, &grace
	}
	p.ContainersStarted = r.time()
	if flags&4 != 0 {
		// Received by a current watch, up to 33 s either side of now.
		p.Received = now.UnixMilli() + r.offset()
	}
	return now, p
}

// FuzzStep feeds Step arbitrary sequences of pods and checks what must hold
// for any input: no panic, no negative latency, each SLI observed at most
// once, skips counted at most once, remembered facts never forgotten, and
// a second identical update changing nothing.
func FuzzStep(f *testing.F) {
	// Seeds: KEP-3085 scenario 1 and story 5 shapes, and a malformed one.
	f.Add([]byte{0, 4, 0, 0, 2, 0, 0, 0, 0, 1, 0, 1, 0, 3, 0, 0, 0, 0, 0, 6, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0, 0, 3})
	f.Add([]byte{0, 10, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0, 0, 2, 3, 0, 0, 0, 5, 2, 0, 30, 30, 0, 4})
	f.Add([]byte{0, 1, 0, 0, 2, 1, 3, 0, 0, 0, 0, 4, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{b: data}
		cfg := &Config{MaxObservationAge: time.Hour, SandboxCreationTimeout: time.Minute}
		var (
			st       State
			kinds    = map[Kind]int{}
			phases   = map[Phase]int{}
			skips    = map[Skip]int{}
			requests int64
		)
		for step := 0; step < 8 && len(r.b) > 0; step++ {
			now, pod := r.pod()
			prev := st
			var out Outcome
			if r.byte()%4 == 0 {
				st, out = Timeout(now, Inputs{}, st, cfg)
			} else {
				st, out = Step(now, pod, Inputs{}, st, cfg)
				again, more := Step(now, pod, Inputs{}, st, cfg)
				if again != st || !more.Empty() {
					t.Fatalf("a second identical update changed something: %+v -> %+v, %+v", st, again, more)
				}
			}
			for _, o := range out.Observations {
				if o.Seconds < 0 {
					t.Fatalf("negative latency %+v", o)
				}
				kinds[o.Kind]++
				if o.Kind == PhaseDone {
					phases[o.Phase]++
				}
			}
			for _, s := range out.Skips {
				skips[s]++
			}
			if prev.FirstSandboxReady != 0 && st.FirstSandboxReady != prev.FirstSandboxReady {
				t.Fatalf("first readiness moved: %d -> %d", prev.FirstSandboxReady, st.FirstSandboxReady)
			}
			if st.Recreations < prev.Recreations || st.Phases&prev.Phases != prev.Phases || !skipsInclude(st.Skipped, prev.Skipped) {
				t.Fatalf("state went back: %+v -> %+v", prev, st)
			}
			if prev.TerminationDone && !st.TerminationDone || prev.TimedOut && !st.TimedOut {
				t.Fatalf("a done SLI came undone: %+v -> %+v", prev, st)
			}
			if requests != 0 && st.DeletionRequested != requests {
				t.Fatalf("deletion request moved: %d -> %d", requests, st.DeletionRequested)
			}
			requests = st.DeletionRequested
		}
		st, out := Vanish(st)
		for _, s := range out.Skips {
			skips[s]++
		}
		for _, k := range []Kind{SandboxCreated, SandboxTimedOut, SandboxExcluded, Terminated, BecameReady, Stabilized} {
			if kinds[k] > 1 {
				t.Fatalf("kind %d observed %d times", k, kinds[k])
			}
		}
		for p, n := range phases {
			if n > 1 {
				t.Fatalf("phase %s observed %d times", p, n)
			}
		}
		for s, n := range skips {
			if n > 1 {
				t.Fatalf("skip %+v counted %d times", s, n)
			}
		}
		if !st.TerminationDone {
			t.Fatal("a vanished pod's termination is not done")
		}
	})
}

// skipsInclude reports whether every skip of b is in a.
func skipsInclude(a, b SkipSet) bool {
	for i := range a {
		if a[i]&b[i] != b[i] {
			return false
		}
	}
	return true
}
