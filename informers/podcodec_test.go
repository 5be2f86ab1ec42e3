package informers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/internal/kube"
)

// The pod client speaks HTTP/1.1 to a server that offers HTTP/2, on a
// connection of its own; the other clients keep HTTP/2.
func TestPodClientSpeaksHTTP1(t *testing.T) {
	protos := make(chan string, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.Proto
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

	rc, err := newPodClient(cfg, &trimmer{})
	require.NoError(t, err)
	require.NoError(t, rc.Get().Resource("pods").Do(context.Background()).Error())
	assert.Equal(t, "HTTP/1.1", <-protos, "the pod client")

	other, err := kube.NewForConfig(cfg)
	require.NoError(t, err)
	// Whatever it makes of a PodList, the request was made.
	_, _ = other.List(context.Background(), kube.StorageClasses, "", metav1.ListOptions{})
	assert.Equal(t, "HTTP/2.0", <-protos, "the other clients")
	assert.Nil(t, cfg.Dial, "the caller's configuration is left alone")
	assert.Empty(t, cfg.NextProtos)
}
