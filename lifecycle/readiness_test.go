package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	podReady       = corev1.PodReady
	podInitialized = corev1.PodInitialized
)

type startup struct {
	created    string
	initC      bool
	started    string // newest container start, "" for none
	conditions []Condition
}

func (s startup) pod(t *testing.T) *Pod {
	p := podWith(s.conditions...)
	if s.created != "" {
		p.CreationTimestamp = metav1.NewTime(ts(t, s.created))
	}
	if s.started != "" {
		p.ContainersStarted = ts(t, s.started).Unix()
	}
	p.HasInitContainers = s.initC
	return p
}

type startupRun struct {
	readiness []float64
	phases    map[string]float64
	skips     []Skip
}

func runStartup(t *testing.T, cfg *Config, at []string, pods []*Pod) startupRun {
	t.Helper()
	var st State
	got := startupRun{phases: map[string]float64{}}
	for i, p := range pods {
		next, out := Step(ts(t, at[i]), p, Inputs{}, st, cfg)
		for _, o := range out.Observations {
			switch o.Kind {
			case BecameReady:
				got.readiness = append(got.readiness, o.Seconds)
			case PhaseDone:
				_, dup := got.phases[o.Phase.String()]
				assert.False(t, dup, "phase %s observed twice", o.Phase)
				got.phases[o.Phase.String()] = o.Seconds
			}
		}
		for _, s := range out.Skips {
			if s.SLI == Readiness || s.SLI == StartupPhase {
				got.skips = append(got.skips, s)
			}
		}
		st = next
	}
	return got
}

func TestReadinessAndPhases(t *testing.T) {
	tests := []struct {
		name      string
		at        []string
		pods      []startup
		readiness []float64
		phases    map[string]float64
		skips     []Skip
	}{
		{
			name: "probes add 4s; no init containers",
			at:   []string{"2024-05-01T10:00:03Z", "2024-05-01T10:00:20Z"},
			pods: []startup{
				{created: "2024-05-01T09:59:58Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podInitialized, T, "2024-05-01T10:00:01Z")}},
				{created: "2024-05-01T09:59:58Z", started: "2024-05-01T10:00:09Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podInitialized, T, "2024-05-01T10:00:01Z"), cond(t, podReady, T, "2024-05-01T10:00:13Z")}},
			},
			readiness: []float64{4},
			// Initialized comes before the sandbox without init containers,
			// so containers run from the sandbox readiness.
			phases: map[string]float64{"scheduling": 2, "sandbox": 2, "containers": 7, "readiness": 4, "total": 15},
		},
		{
			name: "without readiness probes Ready follows the start",
			at:   []string{"2024-05-01T10:00:20Z"},
			pods: []startup{
				{created: "2024-05-01T10:00:00Z", started: "2024-05-01T10:00:05Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:01Z"), cond(t, podReady, T, "2024-05-01T10:00:05Z")}},
			},
			readiness: []float64{0},
			phases:    map[string]float64{"scheduling": 0, "sandbox": 1, "containers": 4, "readiness": 0, "total": 5},
		},
		{
			name: "init containers: init and containers phases split at Initialized",
			at:   []string{"2024-05-01T10:00:02Z", "2024-05-01T10:00:12Z", "2024-05-01T10:00:30Z"},
			pods: []startup{
				{created: "2024-05-01T10:00:00Z", initC: true, conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podInitialized, F, "2024-05-01T10:00:00Z")}},
				{created: "2024-05-01T10:00:00Z", initC: true, conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podInitialized, T, "2024-05-01T10:00:12Z")}},
				{created: "2024-05-01T10:00:00Z", initC: true, started: "2024-05-01T10:00:20Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podInitialized, T, "2024-05-01T10:00:12Z"), cond(t, podReady, T, "2024-05-01T10:00:21Z")}},
			},
			readiness: []float64{1},
			phases:    map[string]float64{"scheduling": 0, "sandbox": 2, "init": 10, "containers": 8, "readiness": 1, "total": 21},
		},
		{
			name: "never ready: only what happened is observed",
			at:   []string{"2024-05-01T10:00:02Z", "2024-05-01T11:00:00Z"},
			pods: []startup{
				{created: "2024-05-01T10:00:00Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:01Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podReady, F, "2024-05-01T10:00:01Z")}},
				{created: "2024-05-01T10:00:00Z", started: "2024-05-01T10:00:03Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:01Z"), cond(t, ready, T, "2024-05-01T10:00:02Z"), cond(t, podReady, F, "2024-05-01T10:00:01Z")}},
			},
			phases: map[string]float64{"scheduling": 1, "sandbox": 1},
		},
		{
			name: "Ready without a running container",
			at:   []string{"2024-05-01T10:00:20Z"},
			pods: []startup{
				{created: "2024-05-01T10:00:00Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:01Z"), cond(t, podReady, T, "2024-05-01T10:00:05Z")}},
			},
			phases: map[string]float64{"scheduling": 0, "sandbox": 1, "total": 5},
			skips:  []Skip{{Readiness, NoContainerStarted}},
		},
		{
			name: "a container restarted after a Ready podslo missed",
			at:   []string{"2024-05-01T10:10:00Z"},
			pods: []startup{
				{created: "2024-05-01T10:00:00Z", started: "2024-05-01T10:05:00Z", conditions: []Condition{cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, "2024-05-01T10:00:01Z"), cond(t, podReady, T, "2024-05-01T10:00:05Z")}},
			},
			phases: map[string]float64{"scheduling": 0, "sandbox": 1, "containers": 299, "total": 5},
			skips:  []Skip{{StartupPhase, NegativeDuration}, {Readiness, NegativeDuration}},
		},
		{
			name: "malformed Ready is counted once",
			at:   []string{"2024-05-01T10:00:20Z", "2024-05-01T10:00:21Z"},
			pods: []startup{
				{conditions: []Condition{cond(t, podReady, "Perhaps", "2024-05-01T10:00:05Z")}},
				{conditions: []Condition{cond(t, podReady, "Perhaps", "2024-05-01T10:00:05Z")}},
			},
			phases: map[string]float64{},
			skips:  []Skip{{Readiness, InvalidCondition}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := make([]*Pod, len(tt.pods))
			for i, p := range tt.pods {
				pods[i] = p.pod(t)
			}
			got := runStartup(t, &Config{}, tt.at, pods)
			assert.Equal(t, tt.readiness, got.readiness)
			assert.Equal(t, tt.phases, got.phases)
			assert.Equal(t, tt.skips, got.skips)
		})
	}
}

type failureRun struct {
	created, timeouts, excluded, tooOld int
}

func TestTimeoutsAndUserErrors(t *testing.T) {
	cfg := &Config{SandboxCreationTimeout: 5 * time.Minute}
	pending := podWith(cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, F, "2024-05-01T10:00:01Z"))
	readyAt := func(at string) *Pod {
		return podWith(cond(t, scheduled, T, "2024-05-01T10:00:00Z"), cond(t, ready, T, at))
	}
	type event struct {
		at        string
		pod       *Pod // Step with this pod
		sweep     bool // the periodic timeout check
		userError bool // a FailedMount event for a missing ConfigMap
	}
	tests := []struct {
		name   string
		events []event
		want   failureRun
	}{
		{
			name: "story 3: never ready, one timeout however often checked",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:04:59Z", sweep: true},
				{at: "2024-05-01T10:05:01Z", sweep: true},
				{at: "2024-05-01T10:06:00Z", sweep: true},
				{at: "2024-05-01T12:00:00Z", pod: pending},
			},
			want: failureRun{timeouts: 1},
		},
		{
			name: "a timed-out pod that becomes ready is still observed",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:06:00Z", sweep: true},
				{at: "2024-05-01T10:07:01Z", pod: readyAt("2024-05-01T10:07:00Z")},
			},
			want: failureRun{timeouts: 1, created: 1},
		},
		{
			name: "missing ConfigMap that later recovers: excluded, not observed",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:00:03Z", userError: true},
				{at: "2024-05-01T10:02:00Z", sweep: true},
				{at: "2024-05-01T10:02:01Z", pod: readyAt("2024-05-01T10:02:00Z")},
			},
			want: failureRun{excluded: 1},
		},
		{
			name: "missing ConfigMap past the timeout: excluded once, not a timeout",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:00:03Z", userError: true},
				{at: "2024-05-01T10:06:00Z", sweep: true},
				{at: "2024-05-01T10:07:01Z", pod: readyAt("2024-05-01T10:07:00Z")},
			},
			want: failureRun{excluded: 1},
		},
		{
			name: "a pod deleted while pending does not time out",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:01:00Z", pod: deleting(t, pending, "2024-05-01T10:01:00Z", 30)},
				{at: "2024-05-01T10:06:00Z", sweep: true},
			},
			want: failureRun{},
		},
		{
			// The case: stuck for 3 days when podslo first sees it.
			name: "a pod first seen stuck for days is no fresh timeout",
			events: []event{
				{at: "2024-05-04T10:00:00Z", pod: pending},
				{at: "2024-05-04T10:00:05Z", sweep: true},
				{at: "2024-05-04T10:10:00Z", sweep: true},
				{at: "2024-05-04T10:11:00Z", pod: readyAt("2024-05-04T10:11:00Z")},
			},
			want: failureRun{tooOld: 1},
		},
		{
			// Seen at scheduling, then podslo was down for a day.
			name: "a timeout that passed longer ago than the max age is not counted",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-02T10:00:00Z", sweep: true},
				{at: "2024-05-02T10:00:30Z", sweep: true},
			},
			want: failureRun{tooOld: 1},
		},
		{
			name: "a timeout just within the max age is counted",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T11:05:00Z", sweep: true},
			},
			want: failureRun{timeouts: 1},
		},
		{
			// podslo was down, or its watch not current, when the timeout
			// passed: the sandbox's own time shows it.
			name: "ready past the timeout with no check in between: a timeout",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:07:01Z", pod: readyAt("2024-05-01T10:07:00Z")},
				{at: "2024-05-01T10:08:00Z", sweep: true},
				{at: "2024-05-01T10:09:00Z", pod: readyAt("2024-05-01T10:07:00Z")},
			},
			want: failureRun{timeouts: 1, created: 1},
		},
		{
			name: "first seen ready past the timeout: a timeout",
			events: []event{
				{at: "2024-05-01T10:07:01Z", pod: readyAt("2024-05-01T10:07:00Z")},
			},
			want: failureRun{timeouts: 1, created: 1},
		},
		{
			// The check counts a pod once now - scheduled > timeout.
			name: "ready exactly at the timeout: no timeout",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:05:01Z", pod: readyAt("2024-05-01T10:05:00Z")},
			},
			want: failureRun{created: 1},
		},
		{
			name: "a user error ready past the timeout: excluded once",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:00:03Z", userError: true},
				{at: "2024-05-01T10:07:01Z", pod: readyAt("2024-05-01T10:07:00Z")},
			},
			want: failureRun{excluded: 1},
		},
		{
			name: "deleted while pending past the timeout, no check in between: a timeout",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:06:31Z", pod: deleting(t, pending, "2024-05-01T10:06:30Z", 30)},
				{at: "2024-05-01T10:07:00Z", sweep: true},
			},
			want: failureRun{timeouts: 1},
		},
		{
			name: "deleted past the timeout after a check counted it: one timeout",
			events: []event{
				{at: "2024-05-01T10:00:02Z", pod: pending},
				{at: "2024-05-01T10:05:30Z", sweep: true},
				{at: "2024-05-01T10:06:31Z", pod: deleting(t, pending, "2024-05-01T10:06:30Z", 30)},
			},
			want: failureRun{timeouts: 1},
		},
		{
			name:   "not scheduled: no timeout",
			events: []event{{at: "2024-05-01T10:00:02Z", pod: podWith(cond(t, scheduled, F, "2024-05-01T10:00:00Z"))}, {at: "2024-05-01T11:00:00Z", sweep: true}},
			want:   failureRun{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				st  State
				got failureRun
			)
			for _, e := range tt.events {
				var out Outcome
				switch {
				case e.userError:
					st = MarkUserError(st)
				case e.sweep:
					st, out = Timeout(ts(t, e.at), Inputs{}, st, cfg)
				default:
					st, out = Step(ts(t, e.at), e.pod, Inputs{}, st, cfg)
				}
				for _, o := range out.Observations {
					switch o.Kind {
					case SandboxCreated:
						got.created++
					case SandboxTimedOut:
						got.timeouts++
					case SandboxExcluded:
						got.excluded++
					}
				}
				for _, sk := range out.Skips {
					if sk == (Skip{SandboxCreation, TooOld}) {
						got.tooOld++
					}
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPending(t *testing.T) {
	assert.False(t, (&State{}).Pending())
	assert.True(t, (&State{Scheduled: 1}).Pending())
	assert.False(t, (&State{Scheduled: 1, FirstSandboxReady: 2}).Pending())
	assert.False(t, (&State{Scheduled: 1, DeletionRequested: 2}).Pending())
}
