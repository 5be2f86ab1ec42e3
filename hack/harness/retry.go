package harness

import (
	"context"
	"errors"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Retry calls fn until it returns nil or an error retryable refuses, at
// most attempts times (0: no limit), waiting 50 ms after the first failure
// and twice as long after each next one, up to 2 s. It returns fn's last
// error, joined with ctx's when ctx ended first.
func Retry(ctx context.Context, retryable func(error) bool, attempts int, fn func() error) error {
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !retryable(err) || (attempts > 0 && attempt >= attempts) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// Unavailable reports whether err says the API server is down or busy
// (or the request was cut), not that the request was wrong: through a
// kube-apiserver outage, every error is such but these.
func Unavailable(err error) bool {
	return !(apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsConflict(err) ||
		apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err))
}

// Overloaded reports whether err says the API server is overloaded or the
// response was cut, on a control plane that stays up.
func Overloaded(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
