package probe

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seconds int32
		millis  *int32
		want    time.Duration
	}{
		{"seconds only", 3, nil, 3 * time.Second},
		{"zero", 0, nil, 0},
		{"plus milliseconds", 1, new(int32(500)), 1500 * time.Millisecond},
		// KEP-3066 says 500ms, but its own GetProbeTimeDuration gives 2s - 500ms.
		{"minus milliseconds", 2, new(int32(-500)), 1500 * time.Millisecond},
		{"minus milliseconds to 100ms", 1, new(int32(-900)), 100 * time.Millisecond},
		{"milliseconds only", 0, new(int32(250)), 250 * time.Millisecond},
		{"explicit zero milliseconds", 4, new(int32(0)), 4 * time.Second},
		{"negative sum", 0, new(int32(-1)), -time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Duration(tc.seconds, tc.millis))
		})
	}
}

// TestParseDurations covers Kubernetes' defaults and every example of
// KEP-3066's Proposal section.
func TestParseDurations(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		value                         string
		initialDelay, timeout, period time.Duration
	}{
		{"defaults", `{"tcpSocket":{"port":80}}`, 0, time.Second, 10 * time.Second},
		{"whole seconds without milliseconds", `{"tcpSocket":{"port":80},"initialDelaySeconds":5,"timeoutSeconds":2,"periodSeconds":3}`,
			5 * time.Second, 2 * time.Second, 3 * time.Second},
		{"KEP: periodSeconds 1 + periodMilliseconds 500 = 1.5s", `{"tcpSocket":{"port":80},"periodSeconds":1,"periodMilliseconds":500}`,
			0, time.Second, 1500 * time.Millisecond},
		// The KEP's text says 500ms here, an arithmetic slip: by its own
		// GetProbeTimeDuration (and "periodSeconds + periodMilliseconds")
		// 2s - 500ms is 1.5s. A 500ms period is periodSeconds 1 with -500.
		{"KEP: periodSeconds 2 + periodMilliseconds -500 = 1.5s", `{"tcpSocket":{"port":80},"periodSeconds":2,"periodMilliseconds":-500}`,
			0, time.Second, 1500 * time.Millisecond},
		{"periodSeconds 1 + periodMilliseconds -500 = 500ms", `{"tcpSocket":{"port":80},"periodSeconds":1,"periodMilliseconds":-500,"timeoutSeconds":1,"timeoutMilliseconds":-500}`,
			0, 500 * time.Millisecond, 500 * time.Millisecond},
		{"KEP: periodSeconds 1 + periodMilliseconds -900 = 100ms", `{"tcpSocket":{"port":80},"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900}`,
			0, 100 * time.Millisecond, 100 * time.Millisecond},
		{"KEP: periodSeconds 0 + periodMilliseconds 500 = 10.5s", `{"tcpSocket":{"port":80},"periodSeconds":0,"periodMilliseconds":500}`,
			0, time.Second, 10500 * time.Millisecond},
		{"KEP: timeoutSeconds 0 + timeoutMilliseconds 500 = 1.5s", `{"tcpSocket":{"port":80},"timeoutSeconds":0,"timeoutMilliseconds":500}`,
			0, 1500 * time.Millisecond, 10 * time.Second},
		{"initial delay in milliseconds", `{"tcpSocket":{"port":80},"initialDelayMilliseconds":250}`,
			250 * time.Millisecond, time.Second, 10 * time.Second},
		{"initial delay of 1ms", `{"tcpSocket":{"port":80},"initialDelaySeconds":1,"initialDelayMilliseconds":-999}`,
			time.Millisecond, time.Second, 10 * time.Second},
		{"timeout equal to period", `{"tcpSocket":{"port":80},"timeoutSeconds":3,"periodSeconds":3}`,
			0, 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.value, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.initialDelay, p.InitialDelay, "initial delay")
			assert.Equal(t, tc.timeout, p.Timeout, "timeout")
			assert.Equal(t, tc.period, p.Period, "period")
		})
	}
}

func TestParseDefaults(t *testing.T) {
	t.Run("unset fields take Kubernetes' defaults", func(t *testing.T) {
		p, err := Parse(`{"httpGet":{"port":8080}}`, 0)
		require.NoError(t, err)
		assert.Equal(t, Spec{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP,
			}},
			TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}, p.Spec)
		assert.Equal(t, "http", p.Type)
		assert.Equal(t, 1, p.SuccessThreshold)
		assert.Equal(t, 3, p.FailureThreshold)
	})
	t.Run("set fields are kept", func(t *testing.T) {
		p, err := Parse(`{"container":"web","httpGet":{"path":"/ready?full=1","port":"http","scheme":"HTTPS","httpHeaders":[{"name":"Host","value":"example.com"}]},
			"initialDelaySeconds":2,"timeoutSeconds":2,"periodSeconds":5,"successThreshold":2,"failureThreshold":1}`, 0)
		require.NoError(t, err)
		assert.Equal(t, Spec{
			Container: "web",
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/ready?full=1", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTPS,
				HTTPHeaders: []corev1.HTTPHeader{{Name: "Host", Value: "example.com"}},
			}},
			InitialDelaySeconds: 2, TimeoutSeconds: 2, PeriodSeconds: 5, SuccessThreshold: 2, FailureThreshold: 1,
		}, p.Spec)
		assert.Equal(t, 2, p.SuccessThreshold)
		assert.Equal(t, 1, p.FailureThreshold)
	})
	for _, tc := range []struct{ value, typ string }{
		{`{"httpGet":{"port":80}}`, "http"},
		{`{"tcpSocket":{"port":"db"}}`, "tcp"},
		{`{"grpc":{"port":9090,"service":"ready"}}`, "grpc"},
	} {
		t.Run("type "+tc.typ, func(t *testing.T) {
			p, err := Parse(tc.value, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.typ, p.Type)
		})
	}
}

// TestParseMinPeriod: the floor applies to period and timeout alike, and a
// 100ms period needs an explicit timeout, as Parse's doc says.
func TestParseMinPeriod(t *testing.T) {
	const fast = `{"tcpSocket":{"port":80},"periodSeconds":1,"periodMilliseconds":-900`
	for _, tc := range []struct {
		name      string
		value     string
		minPeriod time.Duration
		wantErr   string
	}{
		{"100ms period with default timeout", fast + `}`, 0,
			"timeoutSeconds: Invalid value: 1: timeout 1s must not exceed period 100ms (timeoutSeconds 0 means 1: set timeoutSeconds 1 and a negative timeoutMilliseconds)"},
		{"100ms period with 100ms timeout", fast + `,"timeoutSeconds":1,"timeoutMilliseconds":-900}`, 0, ""},
		{"100ms period with 50ms timeout is under the floor", fast + `,"timeoutSeconds":1,"timeoutMilliseconds":-950}`, 0,
			"timeoutMilliseconds: Invalid value: -950: timeout 50ms must be at least 100ms"},
		{"50ms timeout with a 50ms floor", `{"tcpSocket":{"port":80},"periodSeconds":1,"periodMilliseconds":-950,"timeoutSeconds":1,"timeoutMilliseconds":-950}`, 50 * time.Millisecond, ""},
		{"negative floor means the default", `{"tcpSocket":{"port":80},"periodSeconds":1,"periodMilliseconds":-950,"timeoutSeconds":1,"timeoutMilliseconds":-950}`, -time.Second,
			"[timeoutMilliseconds: Invalid value: -950: timeout 50ms must be at least 100ms, periodMilliseconds: Invalid value: -950: period 50ms must be at least 100ms]"},
		{"a floor above a second", `{"tcpSocket":{"port":80},"periodSeconds":1}`, 2 * time.Second,
			"[timeoutSeconds: Invalid value: 1: timeout 1s must be at least 2s, periodSeconds: Invalid value: 1: period 1s must be at least 2s]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.value, tc.minPeriod)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.wantErr)
		})
	}
}

// TestParseErrors holds each refused value beside the exact error text the
// agent puts into an Event.
func TestParseErrors(t *testing.T) {
	const tcp = `"tcpSocket":{"port":80}`
	for _, tc := range []struct {
		name, value, want string
	}{
		// Decoding.
		{"empty value", ``, `podslo.io/readiness-probe: Invalid value: must be a JSON object`},
		{"null", `null`, `podslo.io/readiness-probe: Invalid value: must be a JSON object`},
		{"array", `[{` + tcp + `}]`, `podslo.io/readiness-probe: Invalid value: must be a JSON object`},
		{"not JSON", `{tcpSocket}`, `podslo.io/readiness-probe: Invalid value: not valid JSON at offset 2: invalid character 't' looking for beginning of object key string`},
		{"truncated", `{` + tcp, `podslo.io/readiness-probe: Invalid value: not valid JSON: unexpected end`},
		{"unknown field", `{` + tcp + `,"perodSeconds":1}`, `podslo.io/readiness-probe: Invalid value: unknown field "perodSeconds"`},
		{"unknown nested field", `{"httpGet":{"port":80,"pth":"/x"}}`, `podslo.io/readiness-probe: Invalid value: unknown field "pth"`},
		{"trailing object", `{` + tcp + `} {}`, `podslo.io/readiness-probe: Invalid value: unexpected data after the JSON object`},
		{"trailing garbage", `{` + tcp + `}x`, `podslo.io/readiness-probe: Invalid value: unexpected data after the JSON object`},
		{"string for a number", `{` + tcp + `,"periodSeconds":"1"}`, `periodSeconds: Invalid value: must be a 32-bit integer, not a JSON string`},
		{"number beyond int32", `{` + tcp + `,"periodMilliseconds":1e10}`, `periodMilliseconds: Invalid value: must be a 32-bit integer, not a JSON number 1e10`},
		{"boolean port", `{"httpGet":{"port":true}}`, `httpGet.port: Invalid value: must be a port number or name, not a JSON bool`},
		{"named grpc port", `{"grpc":{"port":"grpc"}}`, `grpc.port: Invalid value: must be a 32-bit integer, not a JSON string`},

		// Handlers.
		{"no handler", `{}`, `podslo.io/readiness-probe: Required value: must specify one of httpGet, tcpSocket or grpc`},
		{"exec", `{"exec":{"command":["true"]}}`,
			`exec: Forbidden: the podslo agent probes over the network from the node and cannot run commands in a container: use httpGet, tcpSocket or grpc`},
		{"two handlers", `{"httpGet":{"port":80},` + tcp + `}`, `tcpSocket: Forbidden: may not specify more than 1 handler type`},
		{"httpGet.host", `{"httpGet":{"port":80,"host":"10.0.0.1"}}`,
			`httpGet.host: Forbidden: the podslo agent only probes the pod's own IP; set a Host header in httpHeaders instead`},
		{"tcpSocket.host", `{"tcpSocket":{"port":80,"host":"metadata.google.internal"}}`, `tcpSocket.host: Forbidden: the podslo agent only probes the pod's own IP`},

		// Ports.
		{"no port", `{"httpGet":{}}`, `httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive`},
		{"port too high", `{"tcpSocket":{"port":65536}}`, `tcpSocket.port: Invalid value: 65536: must be between 1 and 65535, inclusive`},
		{"negative port", `{"httpGet":{"port":-1}}`, `httpGet.port: Invalid value: -1: must be between 1 and 65535, inclusive`},
		{"number as a port name", `{"httpGet":{"port":"8080"}}`, `httpGet.port: Invalid value: "8080": must contain at least one letter (a-z)`},
		{"bad port name", `{"tcpSocket":{"port":"http_port-"}}`,
			`[tcpSocket.port: Invalid value: "http_port-": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), tcpSocket.port: Invalid value: "http_port-": must not begin or end with a hyphen]`},
		{"port name too long", `{"tcpSocket":{"port":"a-very-long-port-name"}}`, `tcpSocket.port: Invalid value: "a-very-long-port-name": must be no more than 15 characters`},
		{"no grpc port", `{"grpc":{"service":"x"}}`, `grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive`},
		{"grpc port too high", `{"grpc":{"port":70000}}`, `grpc.port: Invalid value: 70000: must be between 1 and 65535, inclusive`},

		// httpGet.
		{"unsupported scheme", `{"httpGet":{"port":80,"scheme":"ftp"}}`, `httpGet.scheme: Unsupported value: "ftp": supported values: "HTTP", "HTTPS"`},
		{"lower-case scheme, as in Kubernetes", `{"httpGet":{"port":80,"scheme":"https"}}`, `httpGet.scheme: Unsupported value: "https": supported values: "HTTP", "HTTPS"`},
		{"bad header name", `{"httpGet":{"port":80,"httpHeaders":[{"name":"X-Ok","value":"1"},{"name":"Bad Header","value":"1"}]}}`,
			`httpGet.httpHeaders[1].name: Invalid value: "Bad Header": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')`},
		{"empty header name", `{"httpGet":{"port":80,"httpHeaders":[{"value":"1"}]}}`,
			`httpGet.httpHeaders[0].name: Invalid value: "": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')`},

		// Seconds and milliseconds.
		{"negative initialDelaySeconds", `{` + tcp + `,"initialDelaySeconds":-1}`, `initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0`},
		{"negative timeoutSeconds", `{` + tcp + `,"timeoutSeconds":-1}`, `timeoutSeconds: Invalid value: -1: must be greater than or equal to 0`},
		{"negative periodSeconds", `{` + tcp + `,"periodSeconds":-1}`, `periodSeconds: Invalid value: -1: must be greater than or equal to 0`},
		{"initialDelayMilliseconds 1000", `{` + tcp + `,"initialDelaySeconds":1,"initialDelayMilliseconds":1000}`,
			`initialDelayMilliseconds: Invalid value: 1000: must be between -999 and 999, inclusive`},
		{"timeoutMilliseconds -1000", `{` + tcp + `,"timeoutSeconds":2,"timeoutMilliseconds":-1000}`,
			`timeoutMilliseconds: Invalid value: -1000: must be between -999 and 999, inclusive`},
		{"periodMilliseconds 1000", `{` + tcp + `,"periodMilliseconds":1000}`, `periodMilliseconds: Invalid value: 1000: must be between -999 and 999, inclusive`},
		{"period under the floor", `{` + tcp + `,"periodSeconds":1,"periodMilliseconds":-950}`, `periodMilliseconds: Invalid value: -950: period 50ms must be at least 100ms`},
		{"timeout under the floor", `{` + tcp + `,"timeoutSeconds":1,"timeoutMilliseconds":-901}`, `timeoutMilliseconds: Invalid value: -901: timeout 99ms must be at least 100ms`},
		{"negative initial delay", `{` + tcp + `,"initialDelayMilliseconds":-1}`, `initialDelayMilliseconds: Invalid value: -1: initial delay -1ms must not be negative`},
		{"timeout over period", `{` + tcp + `,"timeoutSeconds":5,"periodSeconds":2}`, `timeoutSeconds: Invalid value: 5: timeout 5s must not exceed period 2s`},
		{"timeout over period by a millisecond", `{` + tcp + `,"timeoutSeconds":1,"timeoutMilliseconds":1,"periodSeconds":1}`,
			`timeoutMilliseconds: Invalid value: 1: timeout 1.001s must not exceed period 1s`},

		// Thresholds.
		{"negative successThreshold", `{` + tcp + `,"successThreshold":-1}`, `successThreshold: Invalid value: -1: must be greater than or equal to 0`},
		{"negative failureThreshold", `{` + tcp + `,"failureThreshold":-2}`, `failureThreshold: Invalid value: -2: must be greater than or equal to 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.value, 0)
			require.EqualError(t, err, tc.want)
			assert.Nil(t, p)
			requireFieldErrors(t, err)
		})
	}
}

// requireFieldErrors checks Parse's contract: an aggregate of field errors.
func requireFieldErrors(t *testing.T, err error) []*field.Error {
	t.Helper()
	var agg utilerrors.Aggregate
	require.True(t, errors.As(err, &agg), "%T is not an Aggregate", err)
	var list []*field.Error
	for _, e := range agg.Errors() {
		var fe *field.Error
		require.True(t, errors.As(e, &fe), "%T is not a *field.Error", e)
		list = append(list, fe)
	}
	return list
}

func TestParseCollectsAllErrors(t *testing.T) {
	t.Run("independent errors are all reported, in field order", func(t *testing.T) {
		_, err := Parse(`{"exec":{"command":["true"]},"httpGet":{"host":"example.com","port":"8080","scheme":"ftp"},
			"periodSeconds":1,"periodMilliseconds":-999,"timeoutMilliseconds":1000,"failureThreshold":-1}`, 0)
		list := requireFieldErrors(t, err)
		var got []string
		for _, e := range list {
			got = append(got, e.Type.String()+" "+e.Field)
		}
		assert.Equal(t, []string{
			"Forbidden exec",
			"Forbidden httpGet",
			"Forbidden httpGet.host",
			"Invalid value httpGet.port",
			"Unsupported value httpGet.scheme",
			"Invalid value timeoutMilliseconds",
			"Invalid value periodMilliseconds",
			"Invalid value failureThreshold",
		}, got)
		assert.EqualError(t, err, `[`+
			`exec: Forbidden: the podslo agent probes over the network from the node and cannot run commands in a container: use httpGet, tcpSocket or grpc, `+
			`httpGet: Forbidden: may not specify more than 1 handler type, `+
			`httpGet.host: Forbidden: the podslo agent only probes the pod's own IP; set a Host header in httpHeaders instead, `+
			`httpGet.port: Invalid value: "8080": must contain at least one letter (a-z), `+
			`httpGet.scheme: Unsupported value: "ftp": supported values: "HTTP", "HTTPS", `+
			`timeoutMilliseconds: Invalid value: 1000: must be between -999 and 999, inclusive, `+
			`periodMilliseconds: Invalid value: -999: period 1ms must be at least 100ms, `+
			`failureThreshold: Invalid value: -1: must be greater than or equal to 0]`)
	})
	t.Run("a sum is not checked again when one of its fields is invalid", func(t *testing.T) {
		_, err := Parse(`{"tcpSocket":{"port":80},"periodSeconds":-1,"timeoutSeconds":5,"initialDelayMilliseconds":-1000}`, 0)
		assert.EqualError(t, err, `[`+
			`initialDelayMilliseconds: Invalid value: -1000: must be between -999 and 999, inclusive, `+
			`periodSeconds: Invalid value: -1: must be greater than or equal to 0]`)
	})
}

// FuzzParse: Parse never panics, refuses only with field errors, and every
// probe it accepts keeps the invariants the agent's workers rely on.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"httpGet":{"path":"/ready","port":"http","scheme":"HTTPS","httpHeaders":[{"name":"Host","value":"x"}]},"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900}`,
		`{"container":"db","tcpSocket":{"port":5432},"initialDelaySeconds":2,"initialDelayMilliseconds":-500,"successThreshold":2,"failureThreshold":1}`,
		`{"grpc":{"port":9090,"service":"ready"},"timeoutSeconds":0,"timeoutMilliseconds":500}`,
		`{"exec":{"command":["true"]},"httpGet":{"host":"example.com"}}`,
		`{"tcpSocket":{"port":80},"periodSeconds":-1,"periodMilliseconds":-999}`,
		`{"tcpSocket":{"port":80}} {}`,
		`null`,
	} {
		f.Add(seed, uint16(0))
	}
	f.Add(`{"tcpSocket":{"port":80},"periodSeconds":2}`, uint16(2000))
	pod := &corev1.Pod{
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.1"},
	}
	f.Fuzz(func(t *testing.T, value string, minPeriodMillis uint16) {
		minPeriod := time.Duration(minPeriodMillis) * time.Millisecond
		p, err := Parse(value, minPeriod)
		if err != nil {
			require.Nil(t, p)
			require.NotEmpty(t, requireFieldErrors(t, err))
			return
		}
		if minPeriod <= 0 {
			minPeriod = DefaultMinPeriod
		}
		assert.GreaterOrEqual(t, p.Period, minPeriod, "period")
		assert.GreaterOrEqual(t, p.Timeout, minPeriod, "timeout")
		assert.LessOrEqual(t, p.Timeout, p.Period, "timeout over period")
		assert.GreaterOrEqual(t, p.InitialDelay, time.Duration(0), "initial delay")
		assert.GreaterOrEqual(t, p.SuccessThreshold, 1, "success threshold")
		assert.GreaterOrEqual(t, p.FailureThreshold, 1, "failure threshold")

		h := p.Spec.ProbeHandler
		assert.Nil(t, h.Exec)
		handlers := map[string]bool{"http": h.HTTPGet != nil, "tcp": h.TCPSocket != nil, "grpc": h.GRPC != nil}
		for typ, set := range handlers {
			assert.Equal(t, typ == p.Type, set, "handler %s for type %q", typ, p.Type)
		}
		if h.HTTPGet != nil {
			assert.Empty(t, h.HTTPGet.Host)
		}
		if h.TCPSocket != nil {
			assert.Empty(t, h.TCPSocket.Host)
		}
		// Target must not panic, whatever it answers.
		_, _ = p.Target(pod)
	})
}
