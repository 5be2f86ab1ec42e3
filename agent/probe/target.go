package probe

import (
	"errors"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ErrNoPodIP says the pod has no status.podIP yet: the probe is not invalid,
// the agent should wait for the next pod update.
var ErrNoPodIP = errors.New("the pod has no IP yet (status.podIP is empty)")

// Target is where one probe goes.
type Target struct {
	Container string // the resolved container name
	Host      string // status.podIP
	Port      int    // resolved port number
}

// Target resolves the container and port against the pod. Errors about the
// probe and the pod's spec are a field.ErrorList aggregate, as from Parse;
// only when those are fine does a missing pod IP give ErrNoPodIP.
func (p *Probe) Target(pod *corev1.Pod) (Target, error) {
	port, portPath := p.port()
	containerPath := field.NewPath("container")
	var container *corev1.Container
	if name := p.Spec.Container; name != "" {
		container = findContainer(pod, name)
		if container == nil {
			return Target{}, field.ErrorList{field.Invalid(containerPath, name, "the pod has no container of this name")}.ToAggregate()
		}
	}

	number := int(port.IntVal)
	if port.Type == intstr.String {
		if container != nil {
			var ok bool
			if number, ok = findPort(container, port.StrVal); !ok {
				return Target{}, field.ErrorList{field.Invalid(portPath, port.StrVal,
					"container "+strconv.Quote(container.Name)+" declares no port of this name")}.ToAggregate()
			}
		} else {
			for i := range pod.Spec.Containers {
				if n, ok := findPort(&pod.Spec.Containers[i], port.StrVal); ok {
					container, number = &pod.Spec.Containers[i], n
					break
				}
			}
			if container == nil {
				return Target{}, field.ErrorList{field.Invalid(portPath, port.StrVal, "no container of the pod declares a port of this name")}.ToAggregate()
			}
		}
	}
	if container == nil {
		if len(pod.Spec.Containers) == 0 {
			return Target{}, field.ErrorList{field.Required(containerPath, "the pod has no containers")}.ToAggregate()
		}
		container = &pod.Spec.Containers[0]
	}
	if pod.Status.PodIP == "" {
		return Target{}, ErrNoPodIP
	}
	return Target{Container: container.Name, Host: pod.Status.PodIP, Port: number}, nil
}

// port returns the handler's port and its path for errors.
func (p *Probe) port() (intstr.IntOrString, *field.Path) {
	h := &p.Spec.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		return h.HTTPGet.Port, field.NewPath("httpGet", "port")
	case h.TCPSocket != nil:
		return h.TCPSocket.Port, field.NewPath("tcpSocket", "port")
	case h.GRPC != nil:
		return intstr.FromInt32(h.GRPC.Port), field.NewPath("grpc", "port")
	}
	return intstr.IntOrString{}, field.NewPath("port")
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// findPort looks a port up by name, ignoring its protocol as the kubelet's
// findPortByName does.
func findPort(c *corev1.Container, name string) (int, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}
