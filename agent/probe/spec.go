package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotation opts a pod into a podslo readiness probe; its value is one JSON
// Spec.
const Annotation = "podslo.io/readiness-probe"

// DefaultMinPeriod is the floor for a probe's period and timeout: KEP-3066's
// "100ms is a first guess" against probes DoS-ing the prober.
const DefaultMinPeriod = 100 * time.Millisecond

// Probe types, the probe_type metric label.
const (
	typeHTTP = "http"
	typeTCP  = "tcp"
	typeGRPC = "grpc"
)

// Spec is the annotation's JSON: a Kubernetes probe plus KEP-3066's
// millisecond fields, which are added to their seconds fields.
type Spec struct {
	// Container names the probed container: its restarts restart the probe,
	// and a named port is looked up in its ports. Default: the container that
	// declares the named port, else the pod's first container.
	Container           string           `json:"container,omitempty"`
	corev1.ProbeHandler `json:",inline"` // httpGet, tcpSocket or grpc; exec is refused
	// InitialDelaySeconds has no default, as in Kubernetes.
	InitialDelaySeconds      int32  `json:"initialDelaySeconds,omitempty"`
	InitialDelayMilliseconds *int32 `json:"initialDelayMilliseconds,omitempty"`
	// TimeoutSeconds 0 means 1, as in Kubernetes, also when
	// TimeoutMilliseconds is set: timeoutSeconds 0 with timeoutMilliseconds
	// 500 is 1.5s.
	TimeoutSeconds      int32  `json:"timeoutSeconds,omitempty"`
	TimeoutMilliseconds *int32 `json:"timeoutMilliseconds,omitempty"`
	// PeriodSeconds 0 means 10, as in Kubernetes, also when
	// PeriodMilliseconds is set.
	PeriodSeconds      int32  `json:"periodSeconds,omitempty"`
	PeriodMilliseconds *int32 `json:"periodMilliseconds,omitempty"`
	// SuccessThreshold 0 means 1.
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
	// FailureThreshold 0 means 3.
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// Probe is a parsed, defaulted and validated Spec.
type Probe struct {
	// Spec is the annotation as written, after defaulting as in Kubernetes
	// (pkg/apis/core/v1/defaults.go): the *Seconds and threshold fields, and
	// httpGet's path ("/") and scheme ("HTTP").
	Spec Spec
	// Type is "http", "tcp" or "grpc": the probe_type metric label.
	Type                          string
	InitialDelay, Timeout, Period time.Duration
	SuccessThreshold              int
	FailureThreshold              int
}

// Duration is KEP-3066's GetProbeTimeDuration: seconds plus milliseconds.
func Duration(seconds int32, milliseconds *int32) time.Duration {
	d := time.Duration(seconds) * time.Second
	if milliseconds != nil {
		d += time.Duration(*milliseconds) * time.Millisecond
	}
	return d
}

// root names the annotation itself in errors about the value as a whole, so
// that they read as well in an Event as the field errors beside them.
var root = field.NewPath(Annotation)

// Parse decodes, defaults and validates an annotation value against a floor
// for period and timeout (minPeriod ≤ 0 means DefaultMinPeriod).
//
// Every error is a field.ErrorList with paths relative to the probe root
// ("periodMilliseconds", "httpGet.port"; the annotation's name for the value
// as a whole), aggregated with ToAggregate(), so that its Error() text can go
// into a Kubernetes Event verbatim. Validation collects all errors, except
// that a combined duration is not checked again when one of its two fields is
// already invalid.
//
// The timeout must not exceed the period, and the default timeout is 1s, so a
// period under 1s needs an explicit timeout: with the default floor, a 100ms
// period takes timeoutSeconds 1 and timeoutMilliseconds -900, as its timeout
// must then be exactly 100ms. (timeoutSeconds 0 is defaulted to 1 before the
// milliseconds are added: timeoutMilliseconds 100 alone is 1.1s.)
func Parse(value string, minPeriod time.Duration) (*Probe, error) {
	if minPeriod <= 0 {
		minPeriod = DefaultMinPeriod
	}
	spec, errs := decode(value)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	setDefaults(&spec)
	probe := &Probe{
		Spec:             spec,
		InitialDelay:     Duration(spec.InitialDelaySeconds, spec.InitialDelayMilliseconds),
		Timeout:          Duration(spec.TimeoutSeconds, spec.TimeoutMilliseconds),
		Period:           Duration(spec.PeriodSeconds, spec.PeriodMilliseconds),
		SuccessThreshold: int(spec.SuccessThreshold),
		FailureThreshold: int(spec.FailureThreshold),
	}
	probe.Type, errs = validateHandler(&spec.ProbeHandler)
	errs = append(errs, validateTiming(probe, minPeriod)...)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return probe, nil
}

// decode is strict because a typo in an annotation would otherwise pass
// silently and leave the pod probed with defaults the author never meant.
func decode(value string) (Spec, field.ErrorList) {
	var spec Spec
	// Decoding null or a non-object must not yield an empty Spec.
	if !strings.HasPrefix(strings.TrimLeft(value, " \t\r\n"), "{") {
		return spec, field.ErrorList{field.Invalid(root, field.OmitValueType{}, "must be a JSON object")}
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, field.ErrorList{decodeError(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return spec, field.ErrorList{field.Invalid(root, field.OmitValueType{}, "unexpected data after the JSON object")}
	}
	return spec, nil
}

// decodeError turns encoding/json's errors into field errors: a type error
// has a path, the others (unknown fields included) only a message.
func decodeError(err error) *field.Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		// encoding/json names the embedded ProbeHandler in the path.
		path := strings.TrimPrefix(typeErr.Field, "ProbeHandler.")
		return field.Invalid(field.NewPath(path), field.OmitValueType{},
			fmt.Sprintf("must be %s, not a JSON %s", jsonKind(path, typeErr.Type), typeErr.Value))
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return field.Invalid(root, field.OmitValueType{}, fmt.Sprintf("not valid JSON at offset %d: %v", syntaxErr.Offset, err))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return field.Invalid(root, field.OmitValueType{}, "not valid JSON: unexpected end")
	}
	return field.Invalid(root, field.OmitValueType{}, strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(path string, t reflect.Type) string {
	if strings.HasSuffix(path, "httpGet.port") || strings.HasSuffix(path, "tcpSocket.port") {
		return "a port number or name" // an intstr.IntOrString, which reports int32
	}
	switch t.Kind() {
	case reflect.Int32:
		return "a 32-bit integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Pointer, reflect.Map:
		return "an object"
	default:
		return t.String()
	}
}

// setDefaults mirrors SetDefaults_Probe and SetDefaults_HTTPGetAction in
// Kubernetes' pkg/apis/core/v1/defaults.go, so that a probe copied from a
// pod spec means the same here.
func setDefaults(spec *Spec) {
	if spec.TimeoutSeconds == 0 {
		spec.TimeoutSeconds = 1
	}
	if spec.PeriodSeconds == 0 {
		spec.PeriodSeconds = 10
	}
	if spec.SuccessThreshold == 0 {
		spec.SuccessThreshold = 1
	}
	if spec.FailureThreshold == 0 {
		spec.FailureThreshold = 3
	}
	if h := spec.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = corev1.URISchemeHTTP
		}
	}
}

// validateHandler returns the probe type and the handler's errors.
func validateHandler(h *corev1.ProbeHandler) (string, field.ErrorList) {
	var errs field.ErrorList
	var probeType string
	handlers := 0
	// As Kubernetes' validateHandler: the second and later handlers are the
	// ones in error.
	tooMany := func(path *field.Path) {
		handlers++
		if handlers > 1 {
			errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
		}
	}
	if h.Exec != nil {
		tooMany(field.NewPath("exec"))
		errs = append(errs, field.Forbidden(field.NewPath("exec"),
			"the podslo agent probes over the network from the node and cannot run commands in a container: use httpGet, tcpSocket or grpc"))
	}
	if h.HTTPGet != nil {
		path := field.NewPath("httpGet")
		tooMany(path)
		probeType = typeHTTP
		errs = append(errs, validateHTTPGet(h.HTTPGet, path)...)
	}
	if h.TCPSocket != nil {
		path := field.NewPath("tcpSocket")
		tooMany(path)
		if probeType == "" {
			probeType = typeTCP
		}
		if h.TCPSocket.Host != "" {
			errs = append(errs, field.Forbidden(path.Child("host"), hostForbidden))
		}
		errs = append(errs, validatePortNumOrName(h.TCPSocket.Port, path.Child("port"))...)
	}
	if h.GRPC != nil {
		path := field.NewPath("grpc")
		tooMany(path)
		if probeType == "" {
			probeType = typeGRPC
		}
		for _, msg := range validation.IsValidPortNum(int(h.GRPC.Port)) {
			errs = append(errs, field.Invalid(path.Child("port"), h.GRPC.Port, msg))
		}
	}
	if handlers == 0 {
		errs = append(errs, field.Required(root, "must specify one of httpGet, tcpSocket or grpc"))
	}
	return probeType, errs
}

// hostForbidden explains the refusal of a host: with one, anyone allowed to
// create a pod could make a node agent connect anywhere the node reaches,
// its own localhost or a cloud metadata endpoint included.
const hostForbidden = "the podslo agent only probes the pod's own IP"

func validateHTTPGet(h *corev1.HTTPGetAction, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Host != "" {
		errs = append(errs, field.Forbidden(path.Child("host"), hostForbidden+"; set a Host header in httpHeaders instead"))
	}
	errs = append(errs, validatePortNumOrName(h.Port, path.Child("port"))...)
	if h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(path.Child("scheme"), h.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	for i, header := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(header.Name) {
			errs = append(errs, field.Invalid(path.Child("httpHeaders").Index(i).Child("name"), header.Name, msg))
		}
	}
	return errs
}

// validatePortNumOrName is Kubernetes' ValidatePortNumOrName: a number, or
// a name to look up in the container's ports.
func validatePortNumOrName(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.String {
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(path, port.StrVal, msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortNum(int(port.IntVal)) {
		errs = append(errs, field.Invalid(path, port.IntVal, msg))
	}
	return errs
}

// validateTiming checks the durations and thresholds of a defaulted probe.
func validateTiming(p *Probe, minPeriod time.Duration) field.ErrorList {
	var errs field.ErrorList
	s := &p.Spec
	delayPath, delayOK := seconds(&errs, "initialDelay", s.InitialDelaySeconds, s.InitialDelayMilliseconds)
	timeoutPath, timeoutOK := seconds(&errs, "timeout", s.TimeoutSeconds, s.TimeoutMilliseconds)
	periodPath, periodOK := seconds(&errs, "period", s.PeriodSeconds, s.PeriodMilliseconds)

	if delayOK && p.InitialDelay < 0 {
		errs = append(errs, field.Invalid(delayPath.field, delayPath.value,
			fmt.Sprintf("initial delay %v must not be negative", p.InitialDelay)))
	}
	// KEP-3066's prose says "greater than 100ms", but its own example of
	// periodSeconds 1 and periodMilliseconds -900 is exactly 100ms, so the
	// floor is inclusive: at least minPeriod, for timeout and period alike.
	if timeoutOK && p.Timeout < minPeriod {
		errs = append(errs, field.Invalid(timeoutPath.field, timeoutPath.value,
			fmt.Sprintf("timeout %v must be at least %v", p.Timeout, minPeriod)))
		timeoutOK = false
	}
	if periodOK && p.Period < minPeriod {
		errs = append(errs, field.Invalid(periodPath.field, periodPath.value,
			fmt.Sprintf("period %v must be at least %v", p.Period, minPeriod)))
		periodOK = false
	}
	// The rule, not Kubernetes': a probe still running when the next
	// is due would delay it, and the period would no longer be what it says.
	if timeoutOK && periodOK && p.Timeout > p.Period {
		detail := fmt.Sprintf("timeout %v must not exceed period %v", p.Timeout, p.Period)
		if s.TimeoutMilliseconds == nil && p.Period < time.Second {
			detail += " (timeoutSeconds 0 means 1: set timeoutSeconds 1 and a negative timeoutMilliseconds)"
		}
		errs = append(errs, field.Invalid(timeoutPath.field, timeoutPath.value, detail))
	}

	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.SuccessThreshold), field.NewPath("successThreshold"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.FailureThreshold), field.NewPath("failureThreshold"))...)
	return errs
}

// combined names where an error about a seconds+milliseconds sum goes: the
// milliseconds field when written, as it is the one that made the sum odd.
type combined struct {
	field *field.Path
	value int32
}

// seconds validates one seconds/milliseconds pair, reporting whether both
// are valid on their own, and where an error about their sum belongs.
func seconds(errs *field.ErrorList, name string, secs int32, millis *int32) (combined, bool) {
	secsPath := field.NewPath(name + "Seconds")
	millisPath := field.NewPath(name + "Milliseconds")
	ok := true
	if secs < 0 {
		*errs = append(*errs, field.Invalid(secsPath, secs, apivalidation.IsNegativeErrorMsg))
		ok = false
	}
	if millis != nil && (*millis <= -1000 || *millis >= 1000) {
		*errs = append(*errs, field.Invalid(millisPath, *millis, "must be between -999 and 999, inclusive"))
		ok = false
	}
	if millis != nil {
		return combined{millisPath, *millis}, ok
	}
	return combined{secsPath, secs}, ok
}
