// Package harness is what hack/chaos and hack/scale do alike: their main
// (Main), ports (FreePort), what their results say of the machine and the
// versions (DescribeMachine, DescribeVersions), API calls retried (Retry),
// namespaces (CreateNamespaces), the exporter processes they start and
// supervise (StartProcess), and the kwok cluster they run on (Cluster),
// filled in parallel (Parallel, Node).
// deploy/kwok/classes.yaml's classes are created by podslo's deploy/kwok
// (kwok.ApplyClasses), which the demo shares.
package harness
