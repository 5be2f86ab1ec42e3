package informers

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/internal/kube/kubetest"
)

// TestStopsPromptlyDuringAnOutage cancels the watches after 20 s of an API
// server that refuses every connection: by then client-go's default
// backoff sleeps 13 to 26 s between tries, and its watch-list retry sleeps
// without looking at its context, so the StorageClass and PVC watches of
// shared informers held the exporter's shutdown for up to a minute (a
// SIGTERM during an outage, and the exporter's outage test in CI). Every
// watch retries after reconnectBackoff, 3 s at most.
func TestStopsPromptlyDuringAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s outage")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := lis.Addr().String()
	require.NoError(t, lis.Close())
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + refused})
	require.NoError(t, err)
	w, err := New(kubetest.Wrap(client), nil, Options{})
	require.NoError(t, err)
	np := NewPolicyWatcher(kubetest.Wrap(client), nil, PolicyOptions{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- w.Start(ctx) }()
	go func() { done <- np.Start(ctx) }()
	time.Sleep(20 * time.Second)
	cancel()
	deadline := time.After(10 * time.Second)
	for range 2 {
		select {
		case <-done:
		case <-deadline:
			t.Fatal("the watches did not stop within 10 s of cancel")
		}
	}
}
