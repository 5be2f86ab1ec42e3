// Package realnode starts one real Kubernetes node for tests: the control
// plane of internal/testenv plus kube-scheduler, kube-controller-manager,
// containerd and a kubelet, on this machine only, and leaves nothing behind.
package realnode
