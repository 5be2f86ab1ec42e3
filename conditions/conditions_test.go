package conditions_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/podslo/podslo/conditions"
)

const (
	stable  corev1.PodConditionType = "podslo.io/Stable"
	drained corev1.PodConditionType = "podslo.io/Drained"
)

var (
	earlier = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// now has a sub-second part that Set must drop; nowSec is what it stores.
	now    = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC))
	nowSec = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
)

// kubeletConds are conditions the agent must never touch.
func kubeletConds() []corev1.PodCondition {
	return []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: earlier},
	}
}

func newOwner(t *testing.T) conditions.Owner {
	t.Helper()
	o, err := conditions.NewOwner(string(stable), string(drained))
	require.NoError(t, err)
	return o
}

func podWith(generation int64, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", Generation: generation},
		Status:     corev1.PodStatus{Conditions: append(kubeletConds(), conds...)},
	}
}

func TestValidateType(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     string
		wantErr error
	}{
		{name: "prefixed", typ: "podslo.io/Stable"},
		{name: "unprefixed", typ: "Ready"},
		{name: "empty", typ: "", wantErr: conditions.ErrInvalidType},
		{name: "empty name", typ: "podslo.io/", wantErr: conditions.ErrInvalidType},
		{name: "space", typ: "podslo.io/Not Stable", wantErr: conditions.ErrInvalidType},
		{name: "uppercase prefix", typ: "PodSLO.io/Stable", wantErr: conditions.ErrInvalidType},
		{name: "two slashes", typ: "podslo.io/a/Stable", wantErr: conditions.ErrInvalidType},
		{name: "name over 63", typ: "podslo.io/" + strings.Repeat("A", 64), wantErr: conditions.ErrInvalidType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := conditions.ValidateType(tc.typ)
			if tc.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.wantErr)
			assert.ErrorContains(t, err, `"`+tc.typ+`"`)
		})
	}
}

func TestNewOwner(t *testing.T) {
	_, err := conditions.NewOwner("podslo.io/Stable", "not valid")
	assert.ErrorIs(t, err, conditions.ErrInvalidType)
	_, err = conditions.NewOwner(string(corev1.PodReady))
	assert.ErrorIs(t, err, conditions.ErrInvalidType, "a kubelet type can never be owned")

	o := newOwner(t)
	assert.True(t, o.Owns(string(stable)))
	assert.True(t, o.Owns(string(drained)))
	assert.False(t, o.Owns(string(corev1.PodReady)))
	assert.False(t, conditions.Owner{}.Owns(string(stable)), "zero Owner owns nothing")
}

func TestSetPod(t *testing.T) {
	for _, tc := range []struct {
		name        string
		generation  int64
		existing    []corev1.PodCondition
		set         corev1.PodCondition
		want        []corev1.PodCondition
		wantChanged bool
	}{
		{
			name:       "new condition is appended with now truncated to the second",
			generation: 3,
			set:        corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled", Message: "no restarts for 10m"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: nowSec, Reason: "Settled", Message: "no restarts for 10m"},
			},
			wantChanged: true,
		},
		{
			name:       "caller's times and generation are ignored",
			generation: 3,
			set: corev1.PodCondition{
				Type: stable, Status: corev1.ConditionTrue, Reason: "Settled",
				ObservedGeneration: 99, LastTransitionTime: earlier, LastProbeTime: earlier,
			},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: nowSec, Reason: "Settled"},
			},
			wantChanged: true,
		},
		{
			name:       "same status keeps transition time but updates reason, message and generation",
			generation: 4,
			existing: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: earlier, Reason: "Restarting", Message: "1 restart"},
			},
			set: corev1.PodCondition{Type: stable, Status: corev1.ConditionFalse, Reason: "CrashLooping", Message: "5 restarts"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionFalse, ObservedGeneration: 4, LastTransitionTime: earlier, Reason: "CrashLooping", Message: "5 restarts"},
			},
			wantChanged: true,
		},
		{
			name:       "status change moves transition time",
			generation: 3,
			existing: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: earlier, Reason: "Restarting"},
			},
			set: corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: nowSec, Reason: "Settled"},
			},
			wantChanged: true,
		},
		{
			name:       "only generation changed",
			generation: 5,
			existing: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 4, LastTransitionTime: earlier, Reason: "Settled"},
			},
			set: corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 5, LastTransitionTime: earlier, Reason: "Settled"},
			},
			wantChanged: true,
		},
		{
			name:       "identical condition is a no-op",
			generation: 3,
			existing: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: earlier, Reason: "Settled", Message: "ok"},
			},
			set: corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled", Message: "ok"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: earlier, Reason: "Settled", Message: "ok"},
			},
			wantChanged: false,
		},
		{
			name:       "missing transition time is filled even without a status change",
			generation: 3,
			existing: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, Reason: "Settled"},
			},
			set: corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: nowSec, Reason: "Settled"},
			},
			wantChanged: true,
		},
		{
			name:       "existing probe time is kept",
			generation: 3,
			existing: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionUnknown, ObservedGeneration: 3, LastProbeTime: earlier, LastTransitionTime: earlier, Reason: "NoData"},
			},
			set: corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled"},
			want: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastProbeTime: earlier, LastTransitionTime: nowSec, Reason: "Settled"},
			},
			wantChanged: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podWith(tc.generation, tc.existing...)
			changed, err := newOwner(t).SetPod(pod, tc.set, now)
			require.NoError(t, err)
			assert.Equal(t, tc.wantChanged, changed)
			assert.Equal(t, append(kubeletConds(), tc.want...), pod.Status.Conditions)
		})
	}
}

func TestSetRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     string
		status  string
		reason  string
		wantErr error
	}{
		{name: "kubelet type", typ: string(corev1.PodReady), status: "True", reason: "Ready", wantErr: conditions.ErrNotOwned},
		{name: "unowned custom type", typ: "podslo.io/Other", status: "True", reason: "Ready", wantErr: conditions.ErrNotOwned},
		{name: "invalid type is never owned", typ: "not valid", status: "True", reason: "Ready", wantErr: conditions.ErrNotOwned},
		{name: "empty status", typ: string(stable), status: "", reason: "Settled", wantErr: conditions.ErrInvalidStatus},
		{name: "lowercase status", typ: string(stable), status: "true", reason: "Settled", wantErr: conditions.ErrInvalidStatus},
		{name: "other status", typ: string(stable), status: "Maybe", reason: "Settled", wantErr: conditions.ErrInvalidStatus},
		{name: "empty reason", typ: string(stable), status: "True", reason: "", wantErr: conditions.ErrInvalidReason},
		{name: "reason starts with digit", typ: string(stable), status: "True", reason: "3Restarts", wantErr: conditions.ErrInvalidReason},
		{name: "reason starts with underscore", typ: string(stable), status: "True", reason: "_Settled", wantErr: conditions.ErrInvalidReason},
		{name: "reason with space", typ: string(stable), status: "True", reason: "Not Settled", wantErr: conditions.ErrInvalidReason},
		{name: "reason with dash", typ: string(stable), status: "True", reason: "Crash-Looping", wantErr: conditions.ErrInvalidReason},
		{name: "reason with dot", typ: string(stable), status: "True", reason: "Settled.", wantErr: conditions.ErrInvalidReason},
		{name: "reason ends with comma", typ: string(stable), status: "True", reason: "ReasonA,", wantErr: conditions.ErrInvalidReason},
		{name: "reason ends with colon", typ: string(stable), status: "True", reason: "ReasonA:", wantErr: conditions.ErrInvalidReason},
		{name: "reason over 1024", typ: string(stable), status: "True", reason: strings.Repeat("A", 1025), wantErr: conditions.ErrInvalidReason},
		{name: "reason single letter", typ: string(stable), status: "True", reason: "S"},
		{name: "reason CamelCase with digits", typ: string(stable), status: "True", reason: "Restarted3Times"},
		{name: "reason snake case", typ: string(stable), status: "False", reason: "my_name"},
		{name: "reason ends with underscore", typ: string(stable), status: "False", reason: "Settled_"},
		{name: "reason list", typ: string(stable), status: "Unknown", reason: "ReasonA,ReasonB"},
		{name: "reason pair", typ: string(stable), status: "Unknown", reason: "ReasonA:ReasonB"},
		{name: "reason of 1024", typ: string(stable), status: "True", reason: strings.Repeat("A", 1024)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner(t)

			pod := podWith(1)
			podChanged, podErr := o.SetPod(pod, corev1.PodCondition{
				Type: corev1.PodConditionType(tc.typ), Status: corev1.ConditionStatus(tc.status), Reason: tc.reason,
			}, now)

			if tc.wantErr == nil {
				require.NoError(t, podErr)
				assert.True(t, podChanged)
				return
			}
			assert.ErrorIs(t, podErr, tc.wantErr)
			assert.ErrorContains(t, podErr, `condition "`+tc.typ+`"`)
			assert.False(t, podChanged)
			assert.Equal(t, kubeletConds(), pod.Status.Conditions, "a refused Set must not touch the pod")
		})
	}
}

func TestGetPod(t *testing.T) {
	podConds := append(kubeletConds(),
		corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled"},
		corev1.PodCondition{Type: drained, Status: corev1.ConditionUnknown, Reason: "NoData"},
	)
	for _, tc := range []struct {
		name   string
		typ    string
		status corev1.ConditionStatus
		exists bool
	}{
		{name: "missing", typ: "podslo.io/Missing", exists: false},
		{name: "false", typ: string(corev1.PodReady), status: corev1.ConditionFalse, exists: true},
		{name: "unknown", typ: string(drained), status: corev1.ConditionUnknown, exists: true},
		{name: "true", typ: string(stable), status: corev1.ConditionTrue, exists: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := conditions.GetPod(podConds, corev1.PodConditionType(tc.typ))
			assert.Equal(t, tc.exists, ok)
			assert.Equal(t, tc.status, c.Status)
		})
	}

	t.Run("get returns a copy", func(t *testing.T) {
		c, ok := conditions.GetPod(podConds, stable)
		require.True(t, ok)
		assert.Equal(t, corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, Reason: "Settled"}, c)
		c.Status = corev1.ConditionFalse
		again, _ := conditions.GetPod(podConds, stable)
		assert.Equal(t, corev1.ConditionTrue, again.Status)
	})
}

func TestPodStatusPatch(t *testing.T) {
	stableCond := corev1.PodCondition{
		Type: stable, Status: corev1.ConditionTrue, ObservedGeneration: 3,
		LastTransitionTime: nowSec, Reason: "Settled", Message: "no restarts for 10m",
	}
	drainedCond := corev1.PodCondition{
		Type: drained, Status: corev1.ConditionFalse, ObservedGeneration: 3,
		LastTransitionTime: earlier, Reason: "Serving",
	}
	for _, tc := range []struct {
		name      string
		given     []corev1.PodCondition
		removed   []corev1.PodConditionType
		wantPatch string
		// wantOwned is what the server holds for owned types after the patch.
		wantOwned []corev1.PodCondition
	}{
		{
			name:  "only owned conditions are carried",
			given: append(kubeletConds(), stableCond),
			wantPatch: `{"status":{"conditions":[
				{"type":"podslo.io/Stable","status":"True","observedGeneration":3,"lastProbeTime":null,
				 "lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Settled","message":"no restarts for 10m"}
			]}}`,
			wantOwned: []corev1.PodCondition{stableCond, drainedCond},
		},
		{
			name:    "removed types become delete directives",
			given:   append(kubeletConds(), stableCond),
			removed: []corev1.PodConditionType{drained},
			wantPatch: `{"status":{"conditions":[
				{"type":"podslo.io/Stable","status":"True","observedGeneration":3,"lastProbeTime":null,
				 "lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Settled","message":"no restarts for 10m"},
				{"$patch":"delete","type":"podslo.io/Drained"}
			]}}`,
			wantOwned: []corev1.PodCondition{stableCond},
		},
		{
			name:      "nothing owned given",
			given:     kubeletConds(),
			wantPatch: `{"status":{"conditions":[]}}`,
			wantOwned: []corev1.PodCondition{
				{Type: stable, Status: corev1.ConditionFalse, ObservedGeneration: 2, LastTransitionTime: earlier, Reason: "Restarting"},
				drainedCond,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, err := newOwner(t).PodStatusPatch(tc.given, tc.removed...)
			require.NoError(t, err)
			assert.JSONEq(t, tc.wantPatch, string(patch))

			// The server's copy has the kubelet's conditions plus stale owned ones.
			server := podWith(2,
				corev1.PodCondition{Type: stable, Status: corev1.ConditionFalse, ObservedGeneration: 2, LastTransitionTime: earlier, Reason: "Restarting"},
				drainedCond,
			)
			server.Status.Conditions = append(server.Status.Conditions,
				corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: earlier, Reason: "ContainersNotReady"})
			before, err := json.Marshal(server)
			require.NoError(t, err)

			after, err := strategicpatch.StrategicMergePatch(before, patch, corev1.Pod{})
			require.NoError(t, err)
			var patched corev1.Pod
			require.NoError(t, json.Unmarshal(after, &patched))

			var kubelet, owned []corev1.PodCondition
			for _, c := range patched.Status.Conditions {
				// Decoding puts times in time.Local; the instant is what matters.
				c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.UTC())
				c.LastProbeTime = metav1.NewTime(c.LastProbeTime.UTC())
				if c.Type == stable || c.Type == drained {
					owned = append(owned, c)
				} else {
					kubelet = append(kubelet, c)
				}
			}
			wantKubelet := append(kubeletConds(),
				corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: earlier, Reason: "ContainersNotReady"})
			assert.Equal(t, wantKubelet, kubelet, "kubelet conditions must be untouched and in order")
			assert.Equal(t, tc.wantOwned, owned)
		})
	}
}

func TestPodStatusPatchRejects(t *testing.T) {
	stableCond := corev1.PodCondition{Type: stable, Status: corev1.ConditionTrue, LastTransitionTime: nowSec, Reason: "Settled"}
	for _, tc := range []struct {
		name    string
		given   []corev1.PodCondition
		removed []corev1.PodConditionType
		wantErr error
		wantMsg string
	}{
		{
			name:    "removing a kubelet type",
			given:   []corev1.PodCondition{stableCond},
			removed: []corev1.PodConditionType{corev1.PodReady},
			wantErr: conditions.ErrNotOwned,
			wantMsg: `pod status patch: condition "Ready": condition type not owned`,
		},
		{
			name:    "set and removed at once",
			given:   []corev1.PodCondition{stableCond},
			removed: []corev1.PodConditionType{stable},
			wantMsg: `pod status patch: condition "podslo.io/Stable" is both set and removed`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, err := newOwner(t).PodStatusPatch(tc.given, tc.removed...)
			assert.Nil(t, patch)
			require.EqualError(t, err, tc.wantMsg)
			if tc.wantErr != nil {
				assert.True(t, errors.Is(err, tc.wantErr))
			}
		})
	}
}
