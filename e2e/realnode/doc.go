// Package realnode checks podslo against a real kubelet, containerd and
// runc (internal/realnode): every value it exports is compared with the
// pods' own conditions, watched by the test, and with the kubelet's metrics.
package realnode
