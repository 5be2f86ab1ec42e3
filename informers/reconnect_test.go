package informers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestReachabilityLogsOncePerOutage: an outage is logged when it starts,
// again once a minute while it lasts, and its end once; an error the
// server answered with is no outage.
func TestReachabilityLogsOncePerOutage(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := newReachability(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})), func() time.Time { return now })
	refused := fmt.Errorf("list pods: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})

	r.answered()
	r.failed(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no")))
	r.failed(context.Canceled)
	assert.Empty(t, buf.String(), "no outage")

	for range 10 {
		r.failed(refused)
		now = now.Add(5 * time.Second)
	}
	now = now.Add(15 * time.Second) // 65 s after the first failure
	r.failed(refused)
	r.failed(refused)
	now = now.Add(2 * time.Second)
	r.answered()
	r.answered()
	r.failed(apierrors.NewServiceUnavailable("starting"))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.Equal(t, []string{
		`level=WARN msg="API server unreachable: pods are not watched until it answers" err="list pods: dial tcp: connect: connection refused"`,
		`level=WARN msg="API server still unreachable" for=1m5s err="list pods: dial tcp: connect: connection refused"`,
		`level=INFO msg="API server reachable again" after=1m7s`,
	}, lines)
}
